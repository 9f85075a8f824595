// Every request on a plain-HTTP connection is checked, not just the first: each test drives a
// hostile second request against a loopback upstream that records what it received, and
// asserts the second request never arrived.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/net/egress_proxy.h"
#include "src/net/testing/proxy_fixture.h"
#include "src/net/testing/socket_tunnel.h"

namespace abox::net {
namespace {

using testing::EgressProxyTest;
using ::testing::EndsWith;
using testing::Get;
using testing::Guest;
using ::testing::HasSubstr;
using testing::kLoopback;
using testing::ProxyPort;
using testing::ReadToEof;
using testing::ReadUntil;
using testing::RecordingHttpUpstream;
using testing::SendAllTo;
using ::testing::StartsWith;
using testing::Transparent;
using Mode = RecordingHttpUpstream::Mode;

class EgressProxyHttpTest : public EgressProxyTest {
 protected:
  // web.test is allowed on the upstream's port; evil.test (same upstream, as on a CDN) is not.
  std::unique_ptr<EgressProxy> MakeWebProxy(const RecordingHttpUpstream& upstream) {
    SetPolicy({absl::StrCat("web.test:", upstream.port())});
    return MakeProxy({{"web.test", {kLoopback}}, {"evil.test", {kLoopback}}});
  }
  ConnectionRecord OnlyRecord() {
    std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
    EXPECT_EQ(records.size(), 1u);
    return records.empty() ? ConnectionRecord{} : records[0];
  }
};

TEST_F(EgressProxyHttpTest, APipelinedRequestForAnotherHostNeverReachesTheUpstream) {
  RecordingHttpUpstream upstream(Mode::kAnswerAtEof);
  auto proxy = MakeWebProxy(upstream);
  Guest guest = Open(*proxy, Transparent(upstream.port()));
  ASSERT_TRUE(SendAllTo(guest.fd.get(), Get("web.test") + Get("evil.test") + Get("web.test")));
  std::string reply = ReadToEof(guest.fd.get());
  // The allowed request's answer, then a 403 for the refused one, then EOF.
  EXPECT_THAT(reply, StartsWith(std::string(testing::kUpstreamResponse)));
  std::string refusal = reply.substr(testing::kUpstreamResponse.size());
  EXPECT_THAT(refusal, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_THAT(refusal, HasSubstr("a request on it for evil.test"));
  EXPECT_EQ(upstream.received(), std::vector<std::string>{Get("web.test")});

  ConnectionRecord r = OnlyRecord();
  EXPECT_EQ(r.verdict, Verdict::kDenied);
  EXPECT_EQ(r.name, "web.test");
  EXPECT_THAT(r.reason, HasSubstr("after 1 request(s)"));
  EXPECT_THAT(r.reason, HasSubstr("evil.test"));
  EXPECT_EQ(r.bytes_up, Get("web.test").size());
}

TEST_F(EgressProxyHttpTest, AKeptAliveRequestWithAnAbsoluteUriToAnotherHostIsRefused) {
  RecordingHttpUpstream upstream(Mode::kAnswerEachHead);
  auto proxy = MakeWebProxy(upstream);
  Guest guest = Open(*proxy, ProxyPort());
  auto request = [&](const std::string& host, const std::string& path) {
    return absl::StrCat("GET http://", host, ":", upstream.port(), path,
                        " HTTP/1.1\r\nHost: ", host, ":", upstream.port(), "\r\n\r\n");
  };
  // Keep-alive to the allowed host works, request after request (each rewritten to origin form).
  for (const char* path : {"/a", "/b"}) {
    ASSERT_TRUE(SendAllTo(guest.fd.get(), request("web.test", path)));
    EXPECT_THAT(ReadUntil(guest.fd.get(), "\r\n\r\nok"), StartsWith("HTTP/1.1 200 OK\r\n"));
  }
  ASSERT_TRUE(SendAllTo(guest.fd.get(), request("evil.test", "/steal")));
  std::string reply = ReadToEof(guest.fd.get());
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_THAT(reply, HasSubstr(absl::StrCat("allowed for web.test:", upstream.port())));

  std::string origin = absl::StrCat(" HTTP/1.1\r\nHost: web.test:", upstream.port(), "\r\n\r\n");
  EXPECT_EQ(upstream.received(),
            std::vector<std::string>{absl::StrCat("GET /a", origin, "GET /b", origin)});
  EXPECT_EQ(OnlyRecord().verdict, Verdict::kDenied);
}

TEST_F(EgressProxyHttpTest, AChunkedBodyIsFollowedSoTheRequestAfterItIsChecked) {
  RecordingHttpUpstream upstream(Mode::kAnswerAtEof);
  auto proxy = MakeWebProxy(upstream);
  // The body carries request-looking bytes naming evil.test (just data: forwarded); the real
  // request after the last chunk names evil.test (refused).
  std::string hidden = Get("evil.test");
  std::string post = absl::StrCat(
      "POST /up HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: chunked\r\n\r\n", absl::Hex(3),
      "\r\nabc\r\n", absl::Hex(hidden.size()), ";ext=1\r\n", hidden, "\r\n0\r\nX-T: 1\r\n\r\n");
  Guest guest = Open(*proxy, Transparent(upstream.port()));
  ASSERT_TRUE(SendAllTo(guest.fd.get(), post + Get("evil.test")));
  std::string reply = ReadToEof(guest.fd.get());
  EXPECT_THAT(reply, StartsWith(std::string(testing::kUpstreamResponse)));
  EXPECT_THAT(reply, HasSubstr("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_EQ(upstream.received(), std::vector<std::string>{post});
}

TEST_F(EgressProxyHttpTest, ContentLengthWithTransferEncodingIsRefused) {
  RecordingHttpUpstream upstream(Mode::kAnswerAtEof);
  auto proxy = MakeWebProxy(upstream);
  // CL.TE: a server reading Content-Length takes "0\r\n\r\nGET ..." as body, one reading
  // chunked sees an empty body and then a request for evil.test (or the other way round).
  std::string smuggled = Get("evil.test");
  std::string clte =
      absl::StrCat("POST / HTTP/1.1\r\nHost: web.test\r\nContent-Length: ", 5 + smuggled.size(),
                   "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", smuggled);
  // As the first request: refused before connecting.
  std::string reply = HttpExchange(*proxy, Transparent(upstream.port()), clte);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(reply, HasSubstr("both Content-Length and Transfer-Encoding"));
  EXPECT_EQ(upstream.accepted(), 0);
  // As a later request: the upstream gets only what came before it.
  reply = HttpExchange(*proxy, Transparent(upstream.port()), Get("web.test") + clte);
  EXPECT_THAT(reply, StartsWith(std::string(testing::kUpstreamResponse)));
  EXPECT_THAT(reply,
              EndsWith("abox: refused HTTP request: both Content-Length and Transfer-Encoding "
                       "(the server and the proxy could frame the body differently)\n"));
  EXPECT_EQ(upstream.received(), std::vector<std::string>{Get("web.test")});
  std::vector<ConnectionRecord> records = sink_->WaitForConnections(2);
  ASSERT_EQ(records.size(), 2u);
  for (const ConnectionRecord& r : records) {
    EXPECT_EQ(r.verdict, Verdict::kError);
  }
}

TEST_F(EgressProxyHttpTest, UpgradeAndH2cAreRefusedBeforeConnecting) {
  RecordingHttpUpstream upstream(Mode::kAnswerAtEof);
  auto proxy = MakeWebProxy(upstream);
  for (const char* upgrade : {"websocket", "h2c"}) {
    std::string reply = HttpExchange(
        *proxy, Transparent(upstream.port()),
        absl::StrCat("GET / HTTP/1.1\r\nHost: web.test\r\nConnection: Upgrade\r\nUpgrade: ",
                     upgrade, "\r\n\r\n"));
    EXPECT_THAT(reply, StartsWith("HTTP/1.1 403 Forbidden\r\n")) << upgrade;
    EXPECT_THAT(reply, HasSubstr("use https:// or wss://")) << upgrade;
  }
  EXPECT_EQ(upstream.accepted(), 0);
}

TEST_F(EgressProxyHttpTest, InsideConnectEveryTunnelledRequestIsChecked) {
  RecordingHttpUpstream upstream(Mode::kAnswerAtEof);
  auto proxy = MakeWebProxy(upstream);
  Guest guest = Open(*proxy, ProxyPort());
  ASSERT_TRUE(SendAllTo(guest.fd.get(),
                        absl::StrCat("CONNECT web.test:", upstream.port(),
                                     " HTTP/1.1\r\nHost: web.test:", upstream.port(), "\r\n\r\n")));
  EXPECT_EQ(ReadUntil(guest.fd.get(), "\r\n\r\n"), "HTTP/1.1 200 Connection established\r\n\r\n");
  ASSERT_TRUE(SendAllTo(guest.fd.get(), Get("web.test") + Get("evil.test")));
  std::string reply = ReadToEof(guest.fd.get());
  EXPECT_THAT(reply, StartsWith(std::string(testing::kUpstreamResponse)));
  EXPECT_THAT(reply, HasSubstr("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_THAT(reply, HasSubstr("a request on it for evil.test"));
  EXPECT_EQ(upstream.received(), std::vector<std::string>{Get("web.test")});
  ConnectionRecord r = OnlyRecord();
  EXPECT_EQ(r.kind, ConnectionKind::kConnect);
  EXPECT_EQ(r.verdict, Verdict::kDenied);
}

TEST_F(EgressProxyHttpTest, InsideConnectSmugglingFramingIsRefused) {
  RecordingHttpUpstream upstream(Mode::kAnswerAtEof);
  auto proxy = MakeWebProxy(upstream);
  Guest guest = Open(*proxy, ProxyPort());
  std::string tete =
      "POST / HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: chunked\r\n"
      "Transfer-Encoding: identity\r\n\r\n0\r\n\r\n";
  ASSERT_TRUE(SendAllTo(guest.fd.get(),
                        absl::StrCat("CONNECT web.test:", upstream.port(), " HTTP/1.1\r\n\r\n",
                                     Get("web.test"), tete, Get("evil.test"))));
  std::string reply = ReadToEof(guest.fd.get());
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200 Connection established\r\n\r\n"));
  EXPECT_THAT(reply, HasSubstr("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(reply, HasSubstr("more than one Transfer-Encoding header"));
  EXPECT_EQ(upstream.received(), std::vector<std::string>{Get("web.test")});
}

}  // namespace
}  // namespace abox::net
