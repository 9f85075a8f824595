// The fixture of the egress proxy tests (tests only): a proxy over a lookup seam and an
// override, a mutable policy, a recording sink, and guests on socketpairs.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/net/egress_proxy.h"
#include "src/net/testing/socket_tunnel.h"

namespace abox::net::testing {

inline const IpAddress kLoopback = *IpAddress::Parse("127.0.0.1");
// Where the guest believed it was connecting (documentation range): the proxy must not use it
// for named connections.
inline const IpAddress kGuestSaid = *IpAddress::Parse("192.0.2.10");

inline TunnelInfo Transparent(uint16_t port, IpAddress ip = kGuestSaid) {
  TunnelInfo info;
  info.kind = TunnelInfo::Kind::kTransparent;
  info.original_ip = ip;
  info.original_port = port;
  return info;
}

inline TunnelInfo ProxyPort() {
  TunnelInfo info;
  info.kind = TunnelInfo::Kind::kHttpProxy;
  return info;
}

inline std::string Get(const std::string& host, const std::string& path = "/x") {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", host, "\r\nUser-Agent: t\r\n\r\n");
}

struct Guest {
  base::UniqueFd fd;
  std::shared_ptr<TunnelObservations> seen;

  bool was_reset() const {
    std::lock_guard<std::mutex> lock(seen->mu);
    return seen->reset;
  }
  std::string reset_reason() const {
    std::lock_guard<std::mutex> lock(seen->mu);
    return seen->reset_reason;
  }
};

class EgressProxyTest : public ::testing::Test {
 protected:
  void SetPolicy(const std::vector<std::string>& rules,
                 EgressPolicy::Mode mode = EgressPolicy::Mode::kAllowlist) {
    policy_.Set(rules, mode);
  }

  // `lookup` plays the host's DNS for names outside the override (no internet in tests):
  // its answers are NOT flagged as override, so they take the real filter path.
  std::unique_ptr<EgressProxy> MakeProxy(ResolverOverride overrides,
                                         ResolverOverride lookup_answers = {},
                                         EgressLimits limits = {}) {
    HostResolver::Options resolver_options;
    resolver_options.override_map = std::move(overrides);
    resolver_options.interface_addresses = [this]() -> absl::StatusOr<std::vector<IpAddress>> {
      std::lock_guard<std::mutex> lock(interfaces_mu_);
      return interfaces_;
    };
    resolver_options.lookup = [answers = std::move(lookup_answers)](
                                  const std::string& name,
                                  absl::Time) -> absl::StatusOr<std::vector<IpAddress>> {
      auto it = answers.find(name);
      if (it == answers.end()) {
        return absl::NotFoundError(absl::StrCat(name, ": no such name (test)"));
      }
      return it->second;
    };
    absl::StatusOr<std::unique_ptr<HostResolver>> resolver =
        HostResolver::Create(std::move(resolver_options));
    EXPECT_TRUE(resolver.ok()) << resolver.status();
    EgressProxy::Options options;
    options.sandbox_id = "sb1";
    options.policy = policy_.Source();
    options.policy.take_once = take_once_;
    options.resolver = std::move(*resolver);
    options.sink = sink_;
    options.limits = limits;
    options.intercept = intercept_;
    absl::StatusOr<std::unique_ptr<EgressProxy>> proxy = EgressProxy::Create(std::move(options));
    EXPECT_TRUE(proxy.ok()) << proxy.status();
    return std::move(*proxy);
  }

  Guest Open(EgressProxy& proxy, TunnelInfo info) {
    auto [tunnel, fd] = SocketTunnel::Make(info);
    Guest guest{std::move(fd), tunnel->observations()};
    proxy.Handle(std::move(tunnel));
    return guest;
  }

  // Sends an HTTP request as the guest and returns everything the proxy answered.
  std::string HttpExchange(EgressProxy& proxy, TunnelInfo info, const std::string& request) {
    Guest guest = Open(proxy, info);
    EXPECT_TRUE(SendAllTo(guest.fd.get(), request));
    return ReadToEof(guest.fd.get());
  }

  MutablePolicy policy_;
  // The host's interface addresses as the proxy's filter sees them (set before MakeProxy).
  std::mutex interfaces_mu_;
  std::vector<IpAddress> interfaces_ = {kLoopback, *IpAddress::Parse("::1")};
  std::function<bool(const std::string&, uint16_t)> take_once_;
  std::shared_ptr<RecordingSink> sink_ = std::make_shared<RecordingSink>();
  // The sandbox's secrets (set before MakeProxy); null: none.
  std::shared_ptr<const InterceptSource> intercept_;
};

}  // namespace abox::net::testing
