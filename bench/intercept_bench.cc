// Egress with secrets (issue 15), in process, no VM: what terminating TLS for a host a secret is
// bound to adds to an HTTPS request, against splicing the same connection, and how often the
// leaf-certificate cache hits. One EgressProxy as aboxd runs it for a sandbox with a secret,
// guests on socketpair tunnels (TLS clients that verify what they are shown), and a loopback
// HTTPS upstream whose certificates come from a test CA the proxy trusts.
//   I1  --requests N kept-alive requests on one connection, --rounds R connections per mode,
//       spliced (host not bound) and intercepted (bound) interleaved: the guest's handshake,
//       connect to first response, and each request after the first (median, p90). Every
//       request carries the secret's placeholder in a header the upstream echoes, so the
//       intercepted path swaps the value in and scrubs it out of the (re-framed) response.
//   I2  --connections M connections (handshake + one request) to --hosts K bound hosts, round
//       robin, on a fresh LeafCache: hits, misses, hit rate, and the handshake on a miss (the
//       leaf is signed then) against a hit.
// Prints Markdown tables for docs/BENCHMARKS.md and, with --json FILE, the raw numbers.
//
//   intercept_bench [--requests N] [--rounds R] [--connections M] [--hosts K] [--json FILE]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "src/base/io.h"
#include "src/net/egress_proxy.h"
#include "src/net/intercept_ca.h"
#include "src/net/leaf_cache.h"
#include "src/net/secret_swap.h"
#include "src/net/testing/https_peers.h"
#include "src/net/testing/socket_tunnel.h"

namespace {

namespace net = abox::net;
namespace nt = abox::net::testing;
using Clock = std::chrono::steady_clock;

constexpr char kDomain[] = "bench.test";
constexpr char kSplicedHost[] = "plain.bench.test";  // allowed, no secret bound
constexpr char kPlaceholder[] = "ABOX_SECRET_API_0123abcd";
constexpr char kValue[] = "sk-real-api-value-0123456789-abcdefghijklmnop";
const net::IpAddress kLoopback = *net::IpAddress::Parse("127.0.0.1");
// Where the guest believed it was connecting (documentation range; the proxy resolves the name).
const net::IpAddress kGuestSaid = *net::IpAddress::Parse("192.0.2.10");

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1,
                      static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1))));
  return v[i];
}

nlohmann::json Summary(const std::vector<double>& v) {
  return {{"n", v.size()},
          {"median", Percentile(v, 0.5)},
          {"p90", Percentile(v, 0.9)},
          {"min", Percentile(v, 0)},
          {"max", Percentile(v, 1)}};
}

std::string BoundHost(int i) { return absl::StrCat("h", i, ".", kDomain); }

class NullSink final : public net::EgressSink {
 public:
  void OnConnection(const net::ConnectionRecord&) override {}
  void OnDns(const net::DnsRecord&) override {}
  void OnDenied(absl::string_view, absl::string_view, uint16_t, absl::string_view) override {}
};

// The upstream side: a CA the proxy trusts (its PEM in `dir`) and a server showing a leaf of it
// for whatever name the client asks for.
struct Upstream {
  std::unique_ptr<net::InterceptCa> ca;
  std::unique_ptr<net::LeafCache> leaves;
  std::unique_ptr<nt::HttpsUpstream> server;
  std::string ca_file;
};

// Where the guest's timings of one connection go.
struct ConnectionTimes {
  double handshake_ms = 0;
  double first_response_ms = 0;
  std::vector<double> later_ms;  // each request after the first
  bool ok = false;
};

class Bench {
 public:
  Bench(const Upstream& upstream, int hosts, std::shared_ptr<net::LeafCache> leaves)
      : upstream_(upstream), leaves_(std::move(leaves)) {
    uint16_t port = upstream.server->port();
    std::vector<std::string> bound;
    net::ResolverOverride names = {{kSplicedHost, {kLoopback}}};
    net::EgressPolicy policy;
    policy.mode = net::EgressPolicy::Mode::kAllowlist;
    policy.allow.push_back(*net::ParseRule(absl::StrCat(kSplicedHost, ":", port)));
    for (int i = 0; i < hosts; ++i) {
      std::string host = BoundHost(i);
      bound.push_back(absl::StrCat(host, ":", port));
      names[host] = {kLoopback};
      policy.allow.push_back(*net::ParseRule(bound.back()));
    }
    auto table = net::SecretTable::Create({{"API", kPlaceholder, kValue, bound, {}, false}});
    if (!table.ok()) {
      Die(table.status());
    }
    auto rules = std::make_shared<net::InterceptRules>();
    rules->secrets = *table;
    auto source = std::make_shared<net::InterceptSource>();
    // As aboxd's: asked for every TLS connection, rules built per connection.
    source->terminates = [table = *table](const std::string& host, uint16_t p) {
      for (const net::SecretTable::Entry& e : table->entries()) {
        if (net::SecretTable::BoundTo(e, host, p)) {
          return true;
        }
      }
      return false;
    };
    source->rules = [rules](const std::string&, uint16_t)
        -> absl::StatusOr<std::shared_ptr<const net::InterceptRules>> { return rules; };
    source->leaves = leaves_;
    absl::StatusOr<std::shared_ptr<const net::UpstreamTrust>> trust =
        net::UpstreamTrust::Create({upstream.ca_file});
    if (!trust.ok()) {
      Die(trust.status());
    }
    source->trust = *trust;
    auto resolver = net::HostResolver::Create({.override_map = std::move(names)});
    if (!resolver.ok()) {
      Die(resolver.status());
    }
    auto proxy = net::EgressProxy::Create(
        {.sandbox_id = "bench",
         .policy = {.current = [policy] { return policy; }},
         .resolver = std::shared_ptr<const net::HostResolver>(std::move(*resolver)),
         .sink = std::make_shared<NullSink>(),
         .intercept = source});
    if (!proxy.ok()) {
      Die(proxy.status());
    }
    proxy_ = std::move(*proxy);
  }

  // One connection to `host`: handshake, then `requests` requests one after the other. `ca`:
  // what the guest verifies the certificate it is shown against.
  ConnectionTimes Run(const std::string& host, X509* ca, int requests, bool post = false) {
    ConnectionTimes t;
    net::TunnelInfo info;
    info.kind = net::TunnelInfo::Kind::kTransparent;
    info.original_ip = kGuestSaid;
    info.original_port = upstream_.server->port();
    Clock::time_point start = Clock::now();
    auto [tunnel, fd] = nt::SocketTunnel::Make(info);
    proxy_->Handle(std::move(tunnel));
    std::string error;
    std::unique_ptr<nt::GuestTls> tls = nt::GuestTls::Connect(fd.get(), host, ca, &error);
    if (tls == nullptr) {
      std::fprintf(stderr, "%s: handshake failed: %s\n", host.c_str(), error.c_str());
      return t;
    }
    t.handshake_ms = Ms(Clock::now() - start);
    std::string body = R"({"query":"a small JSON body, as an API client posts"})";
    std::string request =
        absl::StrCat(post ? "POST" : "GET", " /r HTTP/1.1\r\nHost: ", host, "\r\n", nt::kEchoHeader,
                     ": ", kPlaceholder, "\r\n",
                     post ? absl::StrCat("Content-Length: ", body.size(), "\r\n") : "", "\r\n");
    std::string want = absl::StrCat("echo:", kPlaceholder);
    for (int i = 0; i < requests; ++i) {
      Clock::time_point sent = Clock::now();
      std::optional<nt::HttpReply> reply;
      if (!tls->Write(request) || (post && !tls->Write(body)) || !(reply = tls->ReadReply()) ||
          reply->body != want) {
        std::fprintf(stderr, "%s: request %d failed (%s)\n", host.c_str(), i,
                     reply ? reply->head.c_str() : "no reply");
        return t;
      }
      double ms = Ms(Clock::now() - (i == 0 ? start : sent));
      if (i == 0) {
        t.first_response_ms = ms;
      } else {
        t.later_ms.push_back(ms);
      }
    }
    tls->Close();
    fd.reset();
    // The upstream serves one connection at a time: let this one end before the next starts.
    while (proxy_->active() > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    t.ok = true;
    return t;
  }

  [[noreturn]] static void Die(const absl::Status& status) {
    std::fprintf(stderr, "intercept_bench: %s\n", std::string(status.message()).c_str());
    std::exit(1);
  }

 private:
  const Upstream& upstream_;
  std::shared_ptr<net::LeafCache> leaves_;
  std::unique_ptr<net::EgressProxy> proxy_;
};

Upstream MakeUpstream(const std::string& dir) {
  Upstream u;
  absl::StatusOr<std::unique_ptr<net::InterceptCa>> ca =
      net::InterceptCa::CreateConstrained({kDomain});
  if (!ca.ok()) {
    Bench::Die(ca.status());
  }
  u.ca = std::move(*ca);
  u.leaves = std::make_unique<net::LeafCache>(*u.ca, net::LeafCache::Options{});
  u.ca_file = dir + "/upstream-ca.pem";
  if (absl::Status s = abox::base::WriteFileAtomic(u.ca_file, u.ca->CertificatePem()); !s.ok()) {
    Bench::Die(s);
  }
  net::LeafCache* leaves = u.leaves.get();
  u.server = std::make_unique<nt::HttpsUpstream>([leaves](const std::string& sni) -> SSL_CTX* {
    absl::StatusOr<std::shared_ptr<const net::LeafCache::Entry>> e = leaves->Get(sni);
    return e.ok() ? (*e)->server_ctx.get() : nullptr;  // the cache keeps the entry alive
  });
  return u;
}

std::shared_ptr<net::LeafCache> FreshLeaves(const net::InterceptCa& ca) {
  return std::make_shared<net::LeafCache>(ca, net::LeafCache::Options{});
}

}  // namespace

int main(int argc, char** argv) {
  int requests = 200;
  int rounds = 5;
  int connections = 200;
  int hosts = 8;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--requests") {
      (void)absl::SimpleAtoi(argv[i + 1], &requests);
    } else if (flag == "--rounds") {
      (void)absl::SimpleAtoi(argv[i + 1], &rounds);
    } else if (flag == "--connections") {
      (void)absl::SimpleAtoi(argv[i + 1], &connections);
    } else if (flag == "--hosts") {
      (void)absl::SimpleAtoi(argv[i + 1], &hosts);
    } else if (flag == "--json") {
      json_path = argv[i + 1];
    }
  }
  requests = std::max(requests, 2);
  rounds = std::max(rounds, 1);
  hosts = std::max(hosts, 1);
  connections = std::max(connections, hosts);
  char tmpl[] = "/tmp/abox-interceptbench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  std::string dir = tmpl;
  Upstream upstream = MakeUpstream(dir);
  // The guests trust the interception CA (as abox installs it) and, for spliced connections,
  // see the upstream's own certificate, which they verify against the upstream's CA.
  std::unique_ptr<net::InterceptCa> intercept_ca = *net::InterceptCa::CreateConstrained({kDomain});

  // I1: spliced and intercepted connections interleaved, so drift on the machine hits both.
  // Index: [intercepted]; post_* for the POST written as head, then body.
  std::vector<double> hs[2], first[2], later[2], post_later[2];
  {
    Bench bench(upstream, hosts, FreshLeaves(*intercept_ca));
    auto run = [&](bool intercepted, int n, bool post) {
      return intercepted ? bench.Run(BoundHost(0), intercept_ca->certificate(), n, post)
                         : bench.Run(kSplicedHost, upstream.ca->certificate(), n, post);
    };
    // Warm-up (leaf signed, code paged in), not counted.
    (void)run(false, 2, false);
    (void)run(true, 2, false);
    for (int r = 0; r < rounds; ++r) {
      for (int mode = 0; mode < 2; ++mode) {
        ConnectionTimes t = run(mode == 1, requests, false);
        ConnectionTimes p = run(mode == 1, requests, true);
        if (!t.ok || !p.ok) {
          return 1;
        }
        hs[mode].push_back(t.handshake_ms);
        first[mode].push_back(t.first_response_ms);
        later[mode].insert(later[mode].end(), t.later_ms.begin(), t.later_ms.end());
        post_later[mode].insert(post_later[mode].end(), p.later_ms.begin(), p.later_ms.end());
      }
    }
  }

  // I2: a fresh cache, M connections round robin over K bound hosts.
  auto leaves = FreshLeaves(*intercept_ca);
  std::vector<double> hs_miss, hs_hit;
  {
    Bench bench(upstream, hosts, leaves);
    for (int i = 0; i < connections; ++i) {
      uint64_t misses_before = leaves->stats().misses;
      ConnectionTimes t = bench.Run(BoundHost(i % hosts), intercept_ca->certificate(), 1);
      if (!t.ok) {
        return 1;
      }
      (leaves->stats().misses > misses_before ? hs_miss : hs_hit).push_back(t.handshake_ms);
    }
  }
  net::LeafCache::Stats stats = leaves->stats();
  double hit_rate =
      static_cast<double>(stats.hits) / static_cast<double>(stats.hits + stats.misses);
  std::filesystem::remove_all(dir);

  auto cell = [](const std::vector<double>& v) {
    return absl::StrCat(absl::StrFormat("%.3f", Percentile(v, 0.5)), " ms");
  };
  std::printf(
      "| I1: %d requests on one connection, %d connections each | spliced | intercepted "
      "| added |\n|---|---|---|---|\n",
      requests, rounds);
  auto row = [&](const char* what, const std::vector<double>* v, double p) {
    double s = Percentile(v[0], p);
    double i = Percentile(v[1], p);
    std::printf("| %s | %.3f ms | %.3f ms | %+.3f ms (x%.1f) |\n", what, s, i, i - s, i / s);
  };
  row("guest TLS handshake, median", hs, 0.5);
  row("connect to first response, median", first, 0.5);
  row("request after the first, median", later, 0.5);
  row("request after the first, p90", later, 0.9);
  row("POST, head and body in two writes, after the first, median", post_later, 0.5);
  row("POST, head and body in two writes, after the first, p90", post_later, 0.9);
  std::printf("\n| I2: %d connections to %d bound hosts, fresh leaf cache | |\n|---|---|\n",
              connections, hosts);
  std::printf("| leaf cache hits / misses | %llu / %llu |\n",
              static_cast<unsigned long long>(stats.hits),
              static_cast<unsigned long long>(stats.misses));
  std::printf("| hit rate | %.1f %% |\n", hit_rate * 100);
  std::printf("| guest TLS handshake on a miss (leaf signed), median of %zu | %s |\n",
              hs_miss.size(), cell(hs_miss).c_str());
  std::printf("| guest TLS handshake on a hit, median of %zu | %s |\n", hs_hit.size(),
              cell(hs_hit).c_str());
  if (!json_path.empty()) {
    nlohmann::json j = {{"requests", requests},
                        {"rounds", rounds},
                        {"spliced",
                         {{"handshake_ms", Summary(hs[0])},
                          {"first_response_ms", Summary(first[0])},
                          {"request_ms", Summary(later[0])},
                          {"post_request_ms", Summary(post_later[0])}}},
                        {"intercepted",
                         {{"handshake_ms", Summary(hs[1])},
                          {"first_response_ms", Summary(first[1])},
                          {"request_ms", Summary(later[1])},
                          {"post_request_ms", Summary(post_later[1])}}},
                        {"leaf_cache",
                         {{"connections", connections},
                          {"hosts", hosts},
                          {"hits", stats.hits},
                          {"misses", stats.misses},
                          {"hit_rate", hit_rate},
                          {"handshake_miss_ms", Summary(hs_miss)},
                          {"handshake_hit_ms", Summary(hs_hit)}}}};
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}
