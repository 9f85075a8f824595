// Test fixture for the egress routes end to end in-process: real HTTP, real SQLite, the real
// EgressService and proxy; the guest's side of each tunnel is a socketpair driven by the test (the
// fake VM's guest has no network stack to redirect), so a "connection" is EgressService::Handle
// with a SocketTunnel. Upstreams are loopback servers reached through the test resolver override.
// Used by egress_api_test.cc (policies, approvals, the review queue) and egress_setup_test.cc
// (the setup phase's wider policy).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/daemon/services/egress_service.h"
#include "src/daemon/testing/daemon_test_base.h"
#include "src/daemon/testing/test_daemon.h"
#include "src/http/testing/http_test_client.h"
#include "src/http/testing/test_server.h"
#include "src/net/testing/socket_tunnel.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon::testing {

// The upstreams' name: StartDaemon() makes it resolve to 127.0.0.1 (test-only resolver override).
inline constexpr char kUpstream[] = "upstream.test";

class EgressApiTest : public DaemonTestBase {
 protected:
  // Starts the daemon; `override_upstream`: upstream.test resolves to 127.0.0.1 through the
  // test-only override (else through `lookup`, when given).
  void StartDaemon(bool override_upstream = true, net::HostResolver::Lookup lookup = nullptr) {
    daemon_ = std::make_unique<TestDaemon>(home_.path());
    EgressServiceOptions options;
    if (override_upstream) {
      options.resolver_override[kUpstream] = {*net::IpAddress::Parse("127.0.0.1")};
    }
    options.lookup = std::move(lookup);
    options.limits.sniff_timeout = absl::Seconds(5);
    daemon_->set_egress_options(std::move(options));
    StartAndConnect();
  }

  http::httptest::Response Call(absl::string_view method, absl::string_view target,
                                const nlohmann::json& body = nullptr) {
    return DaemonTestBase::Call(method, target, body.is_null() ? "" : body.dump());
  }

  std::string Create(const nlohmann::json& body = nlohmann::json::object()) {
    http::httptest::Response r = Call("POST", "/v1/sandboxes", body);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", "");
  }

  // One guest connection through the sandbox's proxy (HTTP proxy port, absolute-form GET to
  // upstream.test:<port>); what the guest read back.
  std::string Fetch(const std::string& id, uint16_t port) {
    net::TunnelInfo info;
    info.kind = net::TunnelInfo::Kind::kHttpProxy;
    auto [tunnel, guest] = net::testing::SocketTunnel::Make(info);
    daemon_->egress().Handle(id, std::move(tunnel));
    std::string host = absl::StrCat(kUpstream, ":", port);
    EXPECT_TRUE(net::testing::SendAllTo(
        guest.get(), absl::StrCat("GET http://", host, "/ HTTP/1.1\r\nHost: ", host, "\r\n\r\n")));
    std::string answer = net::testing::ReadToEof(guest.get());
    guest.reset();  // the proxy's drain after a 403 ends at once
    return answer;
  }

  // A guest request for http://<host>/ through the sandbox's proxy; what the guest read back.
  std::string FetchHost(const std::string& id, const std::string& host) {
    net::TunnelInfo info;
    info.kind = net::TunnelInfo::Kind::kHttpProxy;
    auto [tunnel, guest] = net::testing::SocketTunnel::Make(info);
    daemon_->egress().Handle(id, std::move(tunnel));
    EXPECT_TRUE(net::testing::SendAllTo(
        guest.get(), absl::StrCat("GET http://", host, "/ HTTP/1.1\r\nHost: ", host, "\r\n\r\n")));
    std::string answer = net::testing::ReadToEof(guest.get());
    guest.reset();
    return answer;
  }

  // The sandbox's log once it holds `connections` connection records (bounded wait).
  nlohmann::json LogWith(const std::string& id, size_t connections) {
    nlohmann::json log;
    for (int i = 0; i < 200; ++i) {
      log = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/egress/log")).Json();
      if (log["connections"].size() >= connections) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return log;
  }

  std::vector<std::string> EventTypes(const std::string& id) {
    daemon_->events().Flush();
    std::vector<std::string> types;
    bool missed = false;
    absl::StatusOr<uint64_t> handle = daemon_->events().Subscribe(
        [&](const store::Event& e) {
          if (e.sandbox_id == id) {
            types.push_back(e.type);
          }
        },
        0, &missed);
    EXPECT_TRUE(handle.ok());
    if (handle.ok()) {
      daemon_->events().Unsubscribe(*handle);
    }
    return types;
  }

  nlohmann::json Queue(const std::string& query = "") {
    http::httptest::Response r = Call("GET", absl::StrCat("/v1/egress/queue", query));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json()["requests"];
  }

  http::httptest::TempDir home_;
};

}  // namespace abox::daemon::testing
