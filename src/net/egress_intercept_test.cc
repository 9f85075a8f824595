// The proxy with a sandbox's secrets (egress_intercept.h, egress_connection.cc step 8), driven
// end to end in process: a guest's TLS client on a fake tunnel that trusts a test interception
// CA, an EgressProxy whose InterceptSource issues leaves from that CA and verifies upstreams
// against another test CA, and a loopback HTTPS upstream that records every plaintext byte it
// received. The hostile cases assert what never reached the upstream.
#include <openssl/x509v3.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/net/egress_proxy.h"
#include "src/net/intercept_ca.h"
#include "src/net/leaf_cache.h"
#include "src/net/secret_swap.h"
#include "src/net/testing/https_peers.h"
#include "src/net/testing/proxy_fixture.h"
#include "src/net/testing/stream_pair.h"
#include "src/net/testing/tls_peers.h"

namespace abox::net {
namespace {

using testing::EgressProxyTest;
using testing::Get;
using testing::Guest;
using testing::GuestTls;
using ::testing::HasSubstr;
using testing::HttpReply;
using testing::HttpsUpstream;
using testing::kEchoHeader;
using testing::kLoopback;
using ::testing::Not;
using testing::ReadToEof;
using testing::SendAllTo;
using ::testing::StartsWith;
using testing::Transparent;

// The upstream's test CA (TestPki) issues for api.example.test only: alt.example.test, bound
// too, is served with api's certificate, which must not verify for it.
constexpr char kApiHost[] = "api.example.test";
constexpr char kAltHost[] = "alt.example.test";
constexpr char kPlainHost[] = "plain.example.test";  // allowed, no secret bound
constexpr char kEvilHost[] = "evil.example.test";
constexpr char kWebHost[] = "web.example.test";  // plain HTTP, no secret bound

constexpr char kApiPlaceholder[] = "ABOX_SECRET_API_0123abcd";
constexpr char kApiValue[] = "sk-real-api-value-0123456789";
constexpr char kOtherPlaceholder[] = "ABOX_SECRET_OTHER_4567ef01";
constexpr char kOtherValue[] = "other-real-value-xyz";

// A request carrying API's placeholder in the header the upstream echoes.
std::string ApiRequest(const std::string& host, const std::string& path) {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", host, "\r\n", kEchoHeader, ": ",
                      kApiPlaceholder, "\r\n\r\n");
}

class EgressInterceptTest : public EgressProxyTest {
 protected:
  // A proxy for a sandbox whose secret API is bound to api and alt on `port`, OTHER to
  // other.example.test; the policy allows api, alt, plain and web on `port`.
  std::unique_ptr<EgressProxy> MakeInterceptProxy(uint16_t port) {
    auto bound = [port](const char* host) { return absl::StrCat(host, ":", port); };
    absl::StatusOr<std::shared_ptr<const SecretTable>> table = SecretTable::Create({
        {"API", kApiPlaceholder, kApiValue, {bound(kApiHost), bound(kAltHost)}, {}, false},
        {"OTHER", kOtherPlaceholder, kOtherValue, {bound("other.example.test")}, {}, false},
    });
    EXPECT_TRUE(table.ok()) << table.status();
    auto rules = std::make_shared<InterceptRules>();
    rules->secrets = *table;
    auto source = std::make_shared<InterceptSource>();
    source->terminates = [table = *table](const std::string& host, uint16_t p) {
      for (const SecretTable::Entry& e : table->entries()) {
        if (SecretTable::BoundTo(e, host, p)) {
          return true;
        }
      }
      return false;
    };
    source->rules = [rules](const std::string&,
                            uint16_t) -> absl::StatusOr<std::shared_ptr<const InterceptRules>> {
      return rules;
    };
    source->leaves = leaves_;
    source->trust = upstream_pki_.trust();
    intercept_ = source;
    SetPolicy({bound(kApiHost), bound(kAltHost), bound(kPlainHost), bound(kWebHost)});
    return MakeProxy({{kApiHost, {kLoopback}},
                      {kAltHost, {kLoopback}},
                      {kPlainHost, {kLoopback}},
                      {kEvilHost, {kLoopback}},
                      {kWebHost, {kLoopback}}});
  }

  // The guest's TLS to `host`, trusting the interception CA only.
  std::unique_ptr<GuestTls> ConnectTrustingAbox(Guest& guest, const std::string& host) {
    std::string error;
    std::unique_ptr<GuestTls> tls =
        GuestTls::Connect(guest.fd.get(), host, intercept_ca_->certificate(), &error);
    EXPECT_NE(tls, nullptr) << error;
    return tls;
  }

  ConnectionRecord OnlyRecord() {
    std::vector<ConnectionRecord> records = sink_->WaitForConnections(1);
    EXPECT_EQ(records.size(), 1u);
    return records.empty() ? ConnectionRecord{} : records[0];
  }

  // The guest's TLS to `host` is up (abox's leaf); the upstream shows `upstream_ctx`'s
  // certificate, which does not verify for `host`: the guest reads a 502 naming why, and
  // nothing it sent went upstream.
  void ExpectBadGatewayBeforeAnyRequest(SSL_CTX* upstream_ctx, const std::string& host) {
    HttpsUpstream upstream(upstream_ctx);
    auto proxy = MakeInterceptProxy(upstream.port());
    Guest guest = Open(*proxy, Transparent(upstream.port()));
    std::unique_ptr<GuestTls> tls = ConnectTrustingAbox(guest, host);
    ASSERT_NE(tls, nullptr);
    // Sent at once: it must wait for the upstream's verification, and never go past it. (A
    // proxy that failed the verification before this write may have answered and closed its
    // side already, so the write may fail (seen once under ASan); the answer is read anyway.)
    (void)tls->Write(ApiRequest(host, "/v1"));
    std::optional<HttpReply> reply = tls->ReadReply();
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, 502);
    EXPECT_THAT(reply->body, HasSubstr(absl::StrCat("upstream certificate for ", host)));
    EXPECT_THAT(reply->body, HasSubstr("did not verify"));
    guest.fd.reset();

    ConnectionRecord r = OnlyRecord();
    EXPECT_EQ(upstream.handshakes(), 0);
    EXPECT_EQ(upstream.all_received(), "");
    EXPECT_EQ(r.name, host);
    EXPECT_TRUE(r.intercepted);
    EXPECT_EQ(r.verdict, Verdict::kError);
    EXPECT_THAT(r.reason, HasSubstr("did not verify"));
    EXPECT_EQ(r.bytes_up, 0u);
  }

  testing::TestPki upstream_pki_;
  std::unique_ptr<InterceptCa> intercept_ca_ = *InterceptCa::CreateConstrained({"example.test"});
  std::shared_ptr<LeafCache> leaves_ =
      std::make_shared<LeafCache>(*intercept_ca_, LeafCache::Options{});
};

TEST_F(EgressInterceptTest, SwapsThePlaceholderUpstreamAndScrubsTheEchoedValue) {
  HttpsUpstream upstream(upstream_pki_.server_ctx());
  auto proxy = MakeInterceptProxy(upstream.port());
  Guest guest = Open(*proxy, Transparent(upstream.port()));
  std::unique_ptr<GuestTls> tls = ConnectTrustingAbox(guest, kApiHost);
  ASSERT_NE(tls, nullptr);
  // The guest was shown abox's leaf, not the upstream's certificate.
  EXPECT_EQ(X509_check_issued(intercept_ca_->certificate(), tls->peer_certificate()), X509_V_OK);

  // Two requests on one kept-alive connection: each is swapped, each echo scrubbed.
  for (const char* path : {"/v1/a", "/v1/b"}) {
    ASSERT_TRUE(tls->Write(ApiRequest(kApiHost, path)));
    std::optional<HttpReply> reply = tls->ReadReply();
    ASSERT_TRUE(reply.has_value()) << path;
    EXPECT_EQ(reply->status, 200);
    EXPECT_EQ(reply->body, absl::StrCat("echo:", kApiPlaceholder));
    EXPECT_THAT(reply->head + reply->body, Not(HasSubstr(kApiValue)));
  }
  tls->Close();
  guest.fd.reset();

  ConnectionRecord r = OnlyRecord();
  std::string received = upstream.all_received();
  EXPECT_EQ(received,
            absl::StrCat("GET /v1/a HTTP/1.1\r\nHost: api.example.test\r\n", kEchoHeader, ": ",
                         kApiValue, "\r\n\r\n", "GET /v1/b HTTP/1.1\r\nHost: api.example.test\r\n",
                         kEchoHeader, ": ", kApiValue, "\r\n\r\n"));
  EXPECT_THAT(received, Not(HasSubstr(kApiPlaceholder)));
  EXPECT_EQ(r.kind, ConnectionKind::kTls);
  EXPECT_EQ(r.name, kApiHost);
  EXPECT_TRUE(r.intercepted);
  EXPECT_EQ(r.verdict, Verdict::kAllowed) << r.reason;
  EXPECT_THAT(r.reason, HasSubstr("TLS terminated for secrets"));
  EXPECT_THAT(r.reason, HasSubstr("swapped API"));
  EXPECT_THAT(r.reason, HasSubstr("2 value(s) scrubbed"));
  EXPECT_THAT(r.reason, Not(HasSubstr(kApiValue)));
  EXPECT_TRUE(r.leak_secret.empty());
}

TEST_F(EgressInterceptTest, RefusesARequestWhoseHostIsNotTheSniItTerminated) {
  HttpsUpstream upstream(upstream_pki_.server_ctx());
  auto proxy = MakeInterceptProxy(upstream.port());
  Guest guest = Open(*proxy, Transparent(upstream.port()));
  std::unique_ptr<GuestTls> tls = ConnectTrustingAbox(guest, kApiHost);
  ASSERT_NE(tls, nullptr);

  // SNI says the bound host, so the proxy terminated; Host says another (the same upstream, as
  // on a CDN, would route it there with the value in it).
  ASSERT_TRUE(tls->Write(ApiRequest(kEvilHost, "/steal")));
  std::optional<HttpReply> reply = tls->ReadReply();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 403);
  EXPECT_THAT(reply->body, HasSubstr("a request on it for evil.example.test"));
  guest.fd.reset();

  ConnectionRecord r = OnlyRecord();
  EXPECT_THAT(upstream.all_received(), Not(HasSubstr(kApiValue)));
  EXPECT_EQ(upstream.all_received(), "");
  EXPECT_TRUE(r.intercepted);
  EXPECT_EQ(r.verdict, Verdict::kDenied);
}

TEST_F(EgressInterceptTest, RefusesAnUnboundPlaceholderInABodySplitAcrossManyWrites) {
  HttpsUpstream upstream(upstream_pki_.server_ctx());
  auto proxy = MakeInterceptProxy(upstream.port());
  Guest guest = Open(*proxy, Transparent(upstream.port()));
  std::unique_ptr<GuestTls> tls = ConnectTrustingAbox(guest, kApiHost);
  ASSERT_NE(tls, nullptr);

  std::string body = absl::StrCat(std::string(100, 'a'), "{\"token\":\"", kOtherPlaceholder, "\"}",
                                  std::string(100, 'z'));
  std::string request = absl::StrCat(
      "POST /upload HTTP/1.1\r\nHost: api.example.test\r\nContent-Length: ", body.size(),
      "\r\n\r\n", body);
  // Three bytes per TLS record: the placeholder reaches the proxy in ten pieces.
  for (size_t at = 0; at < request.size(); at += 3) {
    if (!tls->Write(absl::string_view(request).substr(at, 3))) {
      break;  // the proxy may stop reading once it refused
    }
  }
  std::optional<HttpReply> reply = tls->ReadReply();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 403);
  EXPECT_THAT(reply->body, HasSubstr("'OTHER'"));
  EXPECT_THAT(reply->body, Not(HasSubstr(kOtherValue)));
  guest.fd.reset();

  ConnectionRecord r = OnlyRecord();
  EXPECT_THAT(upstream.all_received(), Not(HasSubstr(kOtherPlaceholder)));
  EXPECT_THAT(upstream.all_received(), Not(HasSubstr(kOtherValue)));
  EXPECT_TRUE(r.intercepted);
  EXPECT_EQ(r.verdict, Verdict::kDenied);
  EXPECT_EQ(r.leak_secret, "OTHER");
  EXPECT_THAT(r.leak_message, HasSubstr("OTHER"));
  EXPECT_THAT(r.reason, HasSubstr("refused:"));
}

TEST_F(EgressInterceptTest, Answers502WhenTheUpstreamCertificateIsFromAnUntrustedCa) {
  testing::SslCtxPtr self_signed = testing::MakeServerContext(kApiHost);
  ExpectBadGatewayBeforeAnyRequest(self_signed.get(), kApiHost);
}

TEST_F(EgressInterceptTest, Answers502WhenTheUpstreamCertificateNamesAnotherHost) {
  // alt.example.test is bound, but its upstream shows api.example.test's certificate (from the
  // trusted CA).
  ExpectBadGatewayBeforeAnyRequest(upstream_pki_.server_ctx(), kAltHost);
}

TEST_F(EgressInterceptTest, SplicesTlsToAnUnboundHostUntouched) {
  testing::SslCtxPtr plain_ctx = testing::MakeServerContext(kPlainHost);
  HttpsUpstream upstream(plain_ctx.get());
  auto proxy = MakeInterceptProxy(upstream.port());
  Guest guest = Open(*proxy, Transparent(upstream.port()));
  std::string error;
  std::unique_ptr<GuestTls> tls = GuestTls::Connect(guest.fd.get(), kPlainHost, nullptr, &error);
  ASSERT_NE(tls, nullptr) << error;
  // The upstream's own certificate reached the guest: nothing terminated the connection.
  EXPECT_EQ(X509_cmp(tls->peer_certificate(), SSL_CTX_get0_certificate(plain_ctx.get())), 0);
  ASSERT_TRUE(tls->Write(ApiRequest(kPlainHost, "/")));
  std::optional<HttpReply> reply = tls->ReadReply();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, absl::StrCat("echo:", kApiPlaceholder));
  tls->Close();
  guest.fd.reset();

  ConnectionRecord r = OnlyRecord();
  // The placeholder went as the guest sent it; the value was never there to send.
  EXPECT_EQ(upstream.all_received(), ApiRequest(kPlainHost, "/"));
  EXPECT_FALSE(r.intercepted);
  EXPECT_EQ(r.verdict, Verdict::kAllowed);
  EXPECT_THAT(r.reason, Not(HasSubstr("TLS terminated")));
  EXPECT_EQ(leaves_->stats().misses, 0u);
}

TEST_F(EgressInterceptTest, RefusesAPlaceholderSentInPlainHttpToAnUnboundHost) {
  testing::RecordingHttpUpstream upstream(testing::RecordingHttpUpstream::Mode::kAnswerEachHead);
  auto proxy = MakeInterceptProxy(upstream.port());
  std::string request = absl::StrCat("GET /x HTTP/1.1\r\nHost: ", kWebHost,
                                     "\r\nAuthorization: Bearer ", kApiPlaceholder, "\r\n\r\n");
  std::string reply = HttpExchange(*proxy, Transparent(upstream.port()), request);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 403 Forbidden\r\n"));
  EXPECT_THAT(reply, HasSubstr("'API'"));
  EXPECT_THAT(reply, Not(HasSubstr(kApiValue)));

  ConnectionRecord r = OnlyRecord();
  for (const std::string& received : upstream.received()) {
    EXPECT_THAT(received, Not(HasSubstr(kApiPlaceholder)));
  }
  EXPECT_EQ(r.kind, ConnectionKind::kHttp);
  EXPECT_TRUE(r.intercepted);
  EXPECT_EQ(r.verdict, Verdict::kDenied);
  EXPECT_EQ(r.leak_secret, "API");
  EXPECT_EQ(r.bytes_up, 0u);
}

TEST_F(EgressInterceptTest, PassesPlainHttpWithoutASecretThrough) {
  testing::FakeHttpUpstream upstream;
  auto proxy = MakeInterceptProxy(upstream.port());
  std::string request = Get(kWebHost);
  EXPECT_EQ(HttpExchange(*proxy, Transparent(upstream.port()), request),
            testing::kUpstreamResponse);

  ConnectionRecord r = OnlyRecord();
  EXPECT_EQ(upstream.requests(), std::vector<std::string>{request});
  EXPECT_TRUE(r.intercepted);
  EXPECT_EQ(r.verdict, Verdict::kAllowed);
  EXPECT_TRUE(r.leak_secret.empty());
}

}  // namespace
}  // namespace abox::net
