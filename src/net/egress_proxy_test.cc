#include "src/net/egress_proxy.h"

#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/net/testing/proxy_fixture.h"
#include "src/net/testing/socket_tunnel.h"
#include "src/net/testing/tls_peers.h"

namespace abox::net {
namespace {

using testing::EgressProxyTest;
using testing::FakeHttpUpstream;
using testing::FakeTlsUpstream;
using testing::Get;
using testing::Guest;
using ::testing::HasSubstr;
using testing::kGuestSaid;
using testing::kLoopback;
using testing::LoopbackServer;
using ::testing::Not;
using testing::ProxyPort;
using testing::ReadToEof;
using testing::ReadUntil;
using testing::RecordingSink;
using testing::RunTlsClient;
using testing::SendAllTo;
using testing::SocketTunnel;
using ::testing::StartsWith;
using testing::TlsExchange;
using testing::Transparent;
using testing::TunnelObservations;

int ThreadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "Threads:")) {
      return std::stoi(line.substr(8));
    }
  }
  return -1;
}

TEST_F(EgressProxyTest, CompletesTlsHandshakeWhenSniIsAllowed) {
  FakeTlsUpstream upstream("secure.test");
  SetPolicy({absl::StrCat("secure.test:", upstream.port())});
  auto proxy = MakeProxy({{"secure.test", {kLoopback}}});
  Guest guest = Open(*proxy, Transparent(upstream.port()));

  TlsExchange tls = RunTlsClient(guest.fd.get(), "secure.test");
  EXPECT_TRUE(tls.handshake);
  EXPECT_EQ(tls.reply, "pong");
  EXPECT_EQ(upstream.last_sni(), "secure.test");
  guest.fd.reset();

  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_EQ(records.size(), 1u);
  const ConnectionRecord& r = records[0];
  EXPECT_EQ(r.sandbox, "sb1");
  EXPECT_EQ(r.kind, ConnectionKind::kTls);
  EXPECT_EQ(r.name, "secure.test");
  EXPECT_EQ(r.address, "127.0.0.1");
  EXPECT_EQ(r.port, upstream.port());
  EXPECT_EQ(r.verdict, Verdict::kAllowed);
  EXPECT_EQ(r.matched_rule, absl::StrCat("secure.test:", upstream.port()));
  EXPECT_TRUE(r.via_override);
  EXPECT_GT(r.bytes_up, 100u);    // at least the ClientHello
  EXPECT_GT(r.bytes_down, 100u);  // at least the server's flight
  EXPECT_GT(r.duration, absl::ZeroDuration());
  EXPECT_TRUE(sink_->denials().empty());
}

TEST_F(EgressProxyTest, ForwardsPlainHttpUnchangedAndCountsBytes) {
  FakeHttpUpstream upstream;
  SetPolicy({absl::StrCat("web.test:", upstream.port())});
  auto proxy = MakeProxy({{"web.test", {kLoopback}}});
  std::string request = Get("Web.Test");
  Guest guest = Open(*proxy, Transparent(upstream.port()));
  ASSERT_TRUE(SendAllTo(guest.fd.get(), request));
  EXPECT_EQ(ReadToEof(guest.fd.get()), testing::kUpstreamResponse);
  guest.fd.reset();

  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].kind, ConnectionKind::kHttp);
  EXPECT_EQ(records[0].name, "web.test");
  EXPECT_EQ(records[0].verdict, Verdict::kAllowed);
  EXPECT_EQ(records[0].bytes_up, request.size());
  EXPECT_EQ(records[0].bytes_down, testing::kUpstreamResponse.size());
  EXPECT_EQ(records[0].reason, "closed");
  EXPECT_GT(records[0].duration, absl::ZeroDuration());
  EXPECT_EQ(upstream.requests(), std::vector<std::string>{request});
}

TEST_F(EgressProxyTest, SendsAbsoluteFormToTheOriginInOriginForm) {
  FakeHttpUpstream upstream;
  SetPolicy({absl::StrCat("web.test:", upstream.port())});
  auto proxy = MakeProxy({{"web.test", {kLoopback}}});
  std::string headers = absl::StrCat(" HTTP/1.1\r\nHost: web.test:", upstream.port(), "\r\n\r\n");
  // What HTTP_PROXY clients send; origin servers get the path (Python's http.server, for one,
  // answers 404 to an absolute-form target).
  std::string request = absl::StrCat("GET http://web.test:", upstream.port(), "/a?b=1", headers);
  EXPECT_EQ(HttpExchange(*proxy, ProxyPort(), request), testing::kUpstreamResponse);
  std::string bare = absl::StrCat("GET http://web.test:", upstream.port(), headers);
  EXPECT_EQ(HttpExchange(*proxy, ProxyPort(), bare), testing::kUpstreamResponse);
  EXPECT_EQ(upstream.requests(), (std::vector<std::string>{absl::StrCat("GET /a?b=1", headers),
                                                           absl::StrCat("GET /", headers)}));
}

TEST_F(EgressProxyTest, Answers403ToDeniedHttpAndReportsTheDenial) {
  FakeHttpUpstream upstream;
  SetPolicy({"other.test"});
  auto proxy = MakeProxy({{"denied.test", {kLoopback}}});
  std::string reply = HttpExchange(*proxy, Transparent(upstream.port()), Get("denied.test"));
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_THAT(reply, HasSubstr("may not connect to denied.test"));
  EXPECT_THAT(reply,
              HasSubstr(absl::StrCat("abox egress approve sb1 denied.test:", upstream.port())));
  EXPECT_EQ(upstream.accepted(), 0);

  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].verdict, Verdict::kDenied);
  EXPECT_EQ(records[0].kind, ConnectionKind::kHttp);
  EXPECT_EQ(records[0].name, "denied.test");
  ASSERT_EQ(sink_->denials().size(), 1u);
  EXPECT_EQ(sink_->denials()[0].name, "denied.test");
  EXPECT_EQ(sink_->denials()[0].port, upstream.port());
}

TEST_F(EgressProxyTest, Answers403ToDeniedConnect) {
  SetPolicy({"other.test"});
  auto proxy = MakeProxy({});
  std::string reply = HttpExchange(
      *proxy, ProxyPort(), "CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_THAT(reply, HasSubstr("abox egress approve sb1 denied.test\n"));
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records[0].kind, ConnectionKind::kConnect);
  EXPECT_EQ(records[0].verdict, Verdict::kDenied);
  ASSERT_EQ(sink_->denials().size(), 1u);
  EXPECT_EQ(sink_->denials()[0].port, 443);
}

TEST_F(EgressProxyTest, ResetsDeniedTls) {
  FakeTlsUpstream upstream("denied.test");
  SetPolicy({"other.test"});
  auto proxy = MakeProxy({{"denied.test", {kLoopback}}});
  Guest guest = Open(*proxy, Transparent(upstream.port()));
  EXPECT_FALSE(RunTlsClient(guest.fd.get(), "denied.test").handshake);
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_TRUE(guest.was_reset());
  EXPECT_EQ(records[0].kind, ConnectionKind::kTls);
  EXPECT_EQ(records[0].verdict, Verdict::kDenied);
  EXPECT_EQ(upstream.handshakes(), 0);
  ASSERT_EQ(sink_->denials().size(), 1u);
  EXPECT_EQ(sink_->denials()[0].name, "denied.test");
}

TEST_F(EgressProxyTest, TunnelsTlsThroughAllowedConnect) {
  FakeTlsUpstream upstream("secure.test");
  SetPolicy({absl::StrCat("secure.test:", upstream.port())});
  auto proxy = MakeProxy({{"secure.test", {kLoopback}}});
  Guest guest = Open(*proxy, ProxyPort());
  ASSERT_TRUE(SendAllTo(guest.fd.get(), absl::StrCat("CONNECT secure.test:", upstream.port(),
                                                     " HTTP/1.1\r\nHost: secure.test:",
                                                     upstream.port(), "\r\n\r\n")));
  EXPECT_EQ(ReadUntil(guest.fd.get(), "\r\n\r\n"), "HTTP/1.1 200 Connection established\r\n\r\n");
  TlsExchange tls = RunTlsClient(guest.fd.get(), "secure.test");
  EXPECT_TRUE(tls.handshake);
  EXPECT_EQ(tls.reply, "pong");
  guest.fd.reset();
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records[0].kind, ConnectionKind::kConnect);
  EXPECT_EQ(records[0].verdict, Verdict::kAllowed);
  EXPECT_GT(records[0].bytes_down, 100u);
}

TEST_F(EgressProxyTest, ResetsConnectWhoseTunnelledSniNamesAnotherHost) {
  FakeTlsUpstream upstream("secure.test");
  SetPolicy({absl::StrCat("secure.test:", upstream.port())});
  auto proxy = MakeProxy({{"secure.test", {kLoopback}}, {"denied.test", {kLoopback}}});
  Guest guest = Open(*proxy, ProxyPort());
  ASSERT_TRUE(SendAllTo(guest.fd.get(), absl::StrCat("CONNECT secure.test:", upstream.port(),
                                                     " HTTP/1.1\r\nHost: secure.test:",
                                                     upstream.port(), "\r\n\r\n")));
  EXPECT_THAT(ReadUntil(guest.fd.get(), "\r\n\r\n"), StartsWith("HTTP/1.1 200"));
  EXPECT_FALSE(RunTlsClient(guest.fd.get(), "denied.test").handshake);
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_TRUE(guest.was_reset());
  EXPECT_EQ(records[0].verdict, Verdict::kDenied);
  EXPECT_THAT(records[0].reason, HasSubstr("tunnelled TLS names denied.test"));
  EXPECT_EQ(upstream.handshakes(), 0);
}

TEST_F(EgressProxyTest, ResetsConnectWhoseTunnelledHostNamesAnotherHost) {
  FakeHttpUpstream upstream;
  SetPolicy({absl::StrCat("web.test:", upstream.port())});
  auto proxy = MakeProxy({{"web.test", {kLoopback}}});
  Guest guest = Open(*proxy, ProxyPort());
  ASSERT_TRUE(
      SendAllTo(guest.fd.get(), absl::StrCat("CONNECT web.test:", upstream.port(),
                                             " HTTP/1.1\r\nHost: web.test:", upstream.port(),
                                             "\r\n\r\n", Get("denied.test"))));
  EXPECT_EQ(ReadToEof(guest.fd.get()), "HTTP/1.1 200 Connection established\r\n\r\n");
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_TRUE(guest.was_reset());
  EXPECT_THAT(records[0].reason, HasSubstr("tunnelled HTTP request names denied.test"));
  EXPECT_TRUE(upstream.requests().empty());
}

TEST_F(EgressProxyTest, RefusesTlsWithoutSni) {
  FakeTlsUpstream upstream("secure.test");
  SetPolicy({absl::StrCat("secure.test:", upstream.port())}, EgressPolicy::Mode::kOpen);
  auto proxy = MakeProxy({{"secure.test", {kLoopback}}});
  Guest guest = Open(*proxy, Transparent(upstream.port()));
  EXPECT_FALSE(RunTlsClient(guest.fd.get(), std::nullopt).handshake);
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_TRUE(guest.was_reset());
  EXPECT_THAT(records[0].reason, HasSubstr("without a server name"));
  EXPECT_TRUE(sink_->denials().empty());
}

TEST_F(EgressProxyTest, RefusesRawTcpWithoutAnAddressRule) {
  SetPolicy({"any.test"}, EgressPolicy::Mode::kOpen);
  auto proxy = MakeProxy({});
  Guest guest = Open(*proxy, Transparent(22));
  ASSERT_TRUE(SendAllTo(guest.fd.get(), "SSH-2.0-OpenSSH_9.2\r\n"));
  EXPECT_EQ(ReadToEof(guest.fd.get()), "");
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_TRUE(guest.was_reset());
  EXPECT_EQ(records[0].kind, ConnectionKind::kTcp);
  EXPECT_EQ(records[0].verdict, Verdict::kDenied);
  EXPECT_THAT(records[0].reason, HasSubstr("no address rule"));
  ASSERT_EQ(sink_->denials().size(), 1u);
  EXPECT_EQ(sink_->denials()[0].name, "192.0.2.10");
  EXPECT_EQ(sink_->denials()[0].port, 22);
}

TEST_F(EgressProxyTest, RefusesAGuestThatSendsNothing) {
  SetPolicy({"any.test"});
  EgressLimits limits;
  limits.sniff_timeout = absl::Milliseconds(100);
  auto proxy = MakeProxy({}, {}, limits);
  Guest guest = Open(*proxy, Transparent(5432));
  EXPECT_EQ(ReadToEof(guest.fd.get()), "");
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_TRUE(guest.was_reset());
  EXPECT_THAT(records[0].reason, HasSubstr("sent nothing"));
}

TEST_F(EgressProxyTest, SplicesRawTcpAllowedByAnAddressRule) {
  LoopbackServer echo([](base::UniqueFd fd) {
    std::string line = ReadUntil(fd.get(), "\n");
    SendAllTo(fd.get(), "echo:" + line);
  });
  SetPolicy({absl::StrCat("127.0.0.1:", echo.port())});
  auto proxy = MakeProxy({});
  Guest guest = Open(*proxy, Transparent(echo.port(), kLoopback));
  ASSERT_TRUE(SendAllTo(guest.fd.get(), "\x01\x02raw\n"));
  EXPECT_EQ(ReadToEof(guest.fd.get()), "echo:\x01\x02raw\n");
  guest.fd.reset();
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records[0].kind, ConnectionKind::kTcp);
  EXPECT_EQ(records[0].verdict, Verdict::kAllowed);
  EXPECT_EQ(records[0].matched_rule, absl::StrCat("127.0.0.1:", echo.port()));
  EXPECT_EQ(records[0].bytes_up, 6u);
  EXPECT_EQ(records[0].bytes_down, 11u);
}

TEST_F(EgressProxyTest, RefusesAnAllowedNameThatResolvesToLoopbackOrPrivate) {
  FakeHttpUpstream upstream;
  FakeTlsUpstream tls_upstream("rebind.test");
  SetPolicy({absl::StrCat("rebind.test:", upstream.port(), ",", tls_upstream.port()),
             absl::StrCat("private.test:", upstream.port())});
  // The lookup seam answers like a hostile DNS server would: not the override.
  auto proxy = MakeProxy(
      {}, {{"rebind.test", {kLoopback}}, {"private.test", {*IpAddress::Parse("10.1.2.3")}}});

  std::string reply = HttpExchange(*proxy, Transparent(upstream.port()), Get("rebind.test"));
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_THAT(reply, HasSubstr("resolves only to addresses the proxy refuses: 127.0.0.1"));
  reply = HttpExchange(*proxy, Transparent(upstream.port()), Get("private.test"));
  EXPECT_THAT(reply, HasSubstr("10.1.2.3"));
  Guest guest = Open(*proxy, Transparent(tls_upstream.port()));
  EXPECT_FALSE(RunTlsClient(guest.fd.get(), "rebind.test").handshake);

  std::vector<ConnectionRecord> records = sink_->WaitForConnections(3);
  ASSERT_EQ(records.size(), 3u);
  for (const ConnectionRecord& r : records) {
    EXPECT_EQ(r.verdict, Verdict::kDenied);
    EXPECT_FALSE(r.via_override);
  }
  EXPECT_EQ(upstream.accepted(), 0);
  EXPECT_EQ(tls_upstream.handshakes(), 0);
  // Approving the name would not help: no "ask to allow" request.
  EXPECT_TRUE(sink_->denials().empty());
}

TEST_F(EgressProxyTest, OverrideIsTheOnlyWayToReachLoopback) {
  FakeHttpUpstream upstream;
  SetPolicy({absl::StrCat("rebind.test:", upstream.port())});
  // Same name, same address, but from the override: allowed and flagged.
  auto proxy = MakeProxy({{"rebind.test", {kLoopback}}}, {{"rebind.test", {kLoopback}}});
  EXPECT_EQ(HttpExchange(*proxy, Transparent(upstream.port()), Get("rebind.test")),
            testing::kUpstreamResponse);
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records[0].verdict, Verdict::kAllowed);
  EXPECT_TRUE(records[0].via_override);
}

TEST_F(EgressProxyTest, AppliesAPolicyChangeToTheNextConnection) {
  FakeHttpUpstream upstream;
  SetPolicy({absl::StrCat("web.test:", upstream.port())});
  auto proxy = MakeProxy({{"web.test", {kLoopback}}});
  EXPECT_EQ(HttpExchange(*proxy, Transparent(upstream.port()), Get("web.test")),
            testing::kUpstreamResponse);
  SetPolicy({});
  EXPECT_THAT(HttpExchange(*proxy, Transparent(upstream.port()), Get("web.test")),
              StartsWith("HTTP/1.1 403"));
  EXPECT_EQ(upstream.requests().size(), 1u);
}

TEST_F(EgressProxyTest, OneShotApprovalAllowsOneConnection) {
  FakeHttpUpstream upstream;
  SetPolicy({});
  std::atomic<int> approvals{1};
  take_once_ = [&](const std::string& name, uint16_t port) {
    return name == "web.test" && port == upstream.port() && approvals.fetch_sub(1) > 0;
  };
  auto proxy = MakeProxy({{"web.test", {kLoopback}}});
  EXPECT_EQ(HttpExchange(*proxy, Transparent(upstream.port()), Get("web.test")),
            testing::kUpstreamResponse);
  EXPECT_THAT(HttpExchange(*proxy, Transparent(upstream.port()), Get("web.test")),
              StartsWith("HTTP/1.1 403"));
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(2);
  ASSERT_EQ(records.size(), 2u);
  bool saw_once = false;
  for (const ConnectionRecord& r : records) {
    saw_once |= r.verdict == Verdict::kAllowed && r.matched_rule == "approved once";
  }
  EXPECT_TRUE(saw_once);
}

TEST_F(EgressProxyTest, ResetsAtOnceInModeNone) {
  SetPolicy({"web.test"}, EgressPolicy::Mode::kNone);
  auto proxy = MakeProxy({{"web.test", {kLoopback}}});
  Guest guest = Open(*proxy, Transparent(443));
  EXPECT_EQ(ReadToEof(guest.fd.get()), "");
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_TRUE(guest.was_reset());
  EXPECT_THAT(guest.reset_reason(), HasSubstr("mode none"));
  EXPECT_EQ(records[0].kind, ConnectionKind::kUnknown);
}

TEST_F(EgressProxyTest, OpenModeAllowsAnyNameButStillRefusesPrivateAddresses) {
  FakeHttpUpstream upstream;
  SetPolicy({}, EgressPolicy::Mode::kOpen);
  auto proxy = MakeProxy({{"anything.test", {kLoopback}}},
                         {{"lan.test", {*IpAddress::Parse("192.168.1.20")}}});
  EXPECT_EQ(HttpExchange(*proxy, Transparent(upstream.port()), Get("anything.test")),
            testing::kUpstreamResponse);
  EXPECT_THAT(HttpExchange(*proxy, Transparent(upstream.port()), Get("lan.test")),
              HasSubstr("192.168.1.20"));
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(2);
  ASSERT_EQ(records.size(), 2u);
  // Records arrive when connections end, in either order.
  for (const ConnectionRecord& r : records) {
    if (r.name == "anything.test") {
      EXPECT_EQ(r.matched_rule, "mode:open");
      EXPECT_EQ(r.verdict, Verdict::kAllowed);
    } else {
      EXPECT_EQ(r.name, "lan.test");
      EXPECT_EQ(r.verdict, Verdict::kDenied);
    }
  }
}

TEST_F(EgressProxyTest, OpenModeRefusesASingleLabelNameWithoutResolvingIt) {
  FakeHttpUpstream upstream;
  SetPolicy({}, EgressPolicy::Mode::kOpen);
  // Were "db" resolved, it would reach the upstream (as a search domain could make it reach a
  // host on the host's network).
  auto proxy = MakeProxy({{"db", {kLoopback}}});
  std::string reply = HttpExchange(*proxy, Transparent(upstream.port()), Get("db"));
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_THAT(reply, HasSubstr("not a fully qualified name"));
  EXPECT_THAT(reply, Not(HasSubstr("abox egress approve")));
  EXPECT_EQ(upstream.accepted(), 0);
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].verdict, Verdict::kDenied);
  EXPECT_TRUE(sink_->denials().empty());
}

TEST_F(EgressProxyTest, Answers400ToAmbiguousHttp) {
  SetPolicy({}, EgressPolicy::Mode::kOpen);
  auto proxy = MakeProxy({});
  std::string reply = HttpExchange(*proxy, Transparent(80),
                                   "GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records[0].verdict, Verdict::kError);
}

TEST_F(EgressProxyTest, CapsConcurrentTunnelsPerSandbox) {
  SetPolicy({}, EgressPolicy::Mode::kOpen);
  EgressLimits limits;
  limits.sniff_timeout = absl::Minutes(5);  // every accepted tunnel stays until Shutdown
  auto proxy = MakeProxy({}, {}, limits);
  int threads_before = ThreadCount();
  std::vector<Guest> guests;
  for (int i = 0; i < 300; ++i) {
    guests.push_back(Open(*proxy, Transparent(443)));
  }
  std::vector<ConnectionRecord> refused = sink_->WaitForConnections(44);
  ASSERT_EQ(refused.size(), 44u);
  for (const ConnectionRecord& r : refused) {
    EXPECT_THAT(r.reason, HasSubstr("too many connections (limit 256"));
  }
  EXPECT_EQ(proxy->active(), 256u);
  EXPECT_LE(ThreadCount(), threads_before + 256);
  int reset = 0;
  for (const Guest& g : guests) {
    reset += g.was_reset() ? 1 : 0;
  }
  EXPECT_EQ(reset, 44);

  proxy->Shutdown();
  EXPECT_EQ(proxy->active(), 0u);
  for (Guest& g : guests) {
    EXPECT_TRUE(g.was_reset());
    EXPECT_EQ(ReadToEof(g.fd.get()), "");
  }
  EXPECT_EQ(sink_->WaitForConnections(300).size(), 300u);
  EXPECT_EQ(ThreadCount(), threads_before);
}

TEST_F(EgressProxyTest, ShutdownResetsASplicedConnection) {
  std::promise<void> accepted;
  LoopbackServer hold([&](base::UniqueFd fd) {
    ReadUntil(fd.get(), "\r\n\r\n");  // spliced: the request arrived
    accepted.set_value();
    ReadToEof(fd.get());  // until the proxy aborts
  });
  SetPolicy({absl::StrCat("hold.test:", hold.port())});
  auto proxy = MakeProxy({{"hold.test", {kLoopback}}});
  Guest guest = Open(*proxy, Transparent(hold.port()));
  ASSERT_TRUE(SendAllTo(guest.fd.get(), Get("hold.test")));
  accepted.get_future().wait();
  proxy->Shutdown();
  EXPECT_TRUE(guest.was_reset());
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records[0].verdict, Verdict::kAllowed);
  EXPECT_EQ(records[0].bytes_up, Get("hold.test").size());
  // After Shutdown, new tunnels are refused.
  Guest late = Open(*proxy, Transparent(hold.port()));
  EXPECT_TRUE(late.was_reset());
}

TEST(EgressProxyCreateTest, RefusesMissingParts) {
  EgressProxy::Options options;
  EXPECT_FALSE(EgressProxy::Create(options).ok());
}

}  // namespace
}  // namespace abox::net
