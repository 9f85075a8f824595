#include "src/net/http_request_head.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace abox::net {
namespace {

HttpSniff Parse(const std::string& bytes) { return ParseHttpRequestHead(bytes); }

TEST(HttpRequestHeadTest, ParsesAConnectRequest) {
  std::string head =
      "CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n"
      "User-Agent: curl/8.5.0\r\nProxy-Connection: Keep-Alive\r\n\r\n";
  HttpSniff sniff = Parse(head + "\x16\x03\x01");
  ASSERT_EQ(sniff.result, HttpSniffResult::kHttp) << sniff.reason;
  EXPECT_TRUE(sniff.head.is_connect());
  EXPECT_EQ(sniff.head.destination.host, "api.github.com");
  EXPECT_EQ(sniff.head.destination.port, 443);
  EXPECT_FALSE(sniff.head.destination.is_ip_literal);
  EXPECT_EQ(sniff.head.head_size, head.size());
  ASSERT_EQ(sniff.head.headers.size(), 3u);
  EXPECT_EQ(sniff.head.headers[1].name, "User-Agent");
  EXPECT_EQ(sniff.head.headers[1].value, "curl/8.5.0");
}

TEST(HttpRequestHeadTest, ConnectWithoutHostOrWithAPortlessHostIsAccepted) {
  HttpSniff bare = Parse("CONNECT Example.COM:8443 HTTP/1.0\r\n\r\n");
  ASSERT_EQ(bare.result, HttpSniffResult::kHttp) << bare.reason;
  EXPECT_EQ(bare.head.destination.host, "example.com");
  EXPECT_EQ(bare.head.destination.port, 8443);
  EXPECT_EQ(bare.head.minor_version, 0);
  HttpSniff portless = Parse("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n");
  EXPECT_EQ(portless.result, HttpSniffResult::kHttp) << portless.reason;
}

TEST(HttpRequestHeadTest, UsesTheHostHeaderForOriginForm) {
  HttpSniff sniff =
      Parse("GET /simple/requests/ HTTP/1.1\r\nhost:  PyPI.org.  \r\nAccept: */*\r\n\r\n");
  ASSERT_EQ(sniff.result, HttpSniffResult::kHttp) << sniff.reason;
  EXPECT_EQ(sniff.head.method, "GET");
  EXPECT_EQ(sniff.head.target, "/simple/requests/");
  EXPECT_EQ(sniff.head.destination.host, "pypi.org");
  EXPECT_EQ(sniff.head.destination.port, 80);
  HttpSniff port = Parse("GET / HTTP/1.1\r\nHost: deb.debian.org:8080\r\n\r\n");
  ASSERT_EQ(port.result, HttpSniffResult::kHttp) << port.reason;
  EXPECT_EQ(port.head.destination.port, 8080);
}

TEST(HttpRequestHeadTest, AcceptsAnAbsoluteFormTargetThatMatchesHost) {
  for (const char* head :
       {"GET http://deb.debian.org/debian/dists HTTP/1.1\r\nHost: deb.debian.org\r\n\r\n",
        "GET HTTP://deb.debian.org:80?x HTTP/1.1\r\nHost: DEB.debian.org:80\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nHost: deb.debian.org\r\n\r\n"}) {
    HttpSniff sniff = Parse(head);
    ASSERT_EQ(sniff.result, HttpSniffResult::kHttp) << head << sniff.reason;
    EXPECT_EQ(sniff.head.destination.host, "deb.debian.org");
    EXPECT_EQ(sniff.head.destination.port, 80);
  }
}

TEST(HttpRequestHeadTest, ReportsIpLiteralHosts) {
  HttpSniff v4 = Parse("GET / HTTP/1.1\r\nHost: 93.184.215.14\r\n\r\n");
  ASSERT_EQ(v4.result, HttpSniffResult::kHttp) << v4.reason;
  EXPECT_TRUE(v4.head.destination.is_ip_literal);
  EXPECT_EQ(v4.head.destination.host, "93.184.215.14");
  HttpSniff v6 = Parse("CONNECT [2001:DB8::1]:443 HTTP/1.1\r\n\r\n");
  ASSERT_EQ(v6.result, HttpSniffResult::kHttp) << v6.reason;
  EXPECT_TRUE(v6.head.destination.is_ip_literal);
  EXPECT_EQ(v6.head.destination.host, "2001:db8::1");
  EXPECT_EQ(v6.head.destination.port, 443);
}

TEST(HttpRequestHeadTest, NeedsMoreUntilTheBlankLineAndSameResultWhenFedByteByByte) {
  std::string head = "GET / HTTP/1.1\r\nHost: a.example\r\nX: y\r\n\r\n";
  for (size_t n = 0; n < head.size(); ++n) {
    EXPECT_EQ(Parse(head.substr(0, n)).result, HttpSniffResult::kNeedMore) << n;
  }
  HttpRequestHeadParser parser;
  for (size_t i = 0; i + 1 < head.size(); ++i) {
    ASSERT_EQ(parser.Feed(head.substr(i, 1)).result, HttpSniffResult::kNeedMore) << i;
  }
  const HttpSniff& done = parser.Feed(head.substr(head.size() - 1));
  ASSERT_EQ(done.result, HttpSniffResult::kHttp) << done.reason;
  EXPECT_EQ(done.head.method, "GET");
  EXPECT_EQ(done.head.destination.host, "a.example");
  EXPECT_EQ(parser.bytes(), head);
  EXPECT_EQ(parser.Feed("body").result, HttpSniffResult::kHttp);
  EXPECT_EQ(parser.bytes(), head);
}

TEST(HttpRequestHeadTest, SaysNotHttpForOtherProtocols) {
  for (std::string bytes :
       {std::string("\x16\x03\x01\x02\x00", 5), std::string("SSH-2.0-OpenSSH_9.6\r\n"),
        std::string(" GET / HTTP/1.1\r\n"), std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        std::string("GET /\r\n"), std::string("GET  / HTTP/1.1\r\n"),
        std::string("get / HTTP/1.1 extra\r\n"), std::string("GET / HTTP/1.x\r\n"),
        std::string("ABCDEFGHIJKLMNOPQRSTUVWXYZ / HTTP/1.1\r\n"), std::string("PING\r\n"),
        std::string("GET /\xff HTTP/1.1\r\n"), std::string("GET /") + '\0' + " HTTP/1.1\r\n"}) {
    HttpSniff sniff = Parse(bytes);
    EXPECT_EQ(sniff.result, HttpSniffResult::kNotHttp) << bytes;
    EXPECT_FALSE(sniff.reason.empty());
  }
  // Decided from the first byte, not after 16 KiB.
  EXPECT_EQ(Parse(std::string(1, '\x00')).result, HttpSniffResult::kNotHttp);
}

TEST(HttpRequestHeadTest, RefusesAmbiguousOrMalformedHeads) {
  std::string hundred;
  for (int i = 0; i < 100; ++i) {
    hundred += "X-" + std::to_string(i) + ": v\r\n";
  }
  std::vector<std::pair<const char*, std::string>> cases = {
      {"obs-fold", "GET / HTTP/1.1\r\nHost: a.example\r\nX: a\r\n  b\r\n\r\n"},
      {"bare CR", "GET / HTTP/1.1\r\nHost: a.example\rX: y\r\n\r\n"},
      {"bare LF in headers", "GET / HTTP/1.1\r\nHost: a.example\nX: y\r\n\r\n"},
      {"bare LF request line", "GET / HTTP/1.1\nHost: a.example\r\n\r\n"},
      {"bare CR request line", "GET / HTTP/1.1\rHost: a.example\r\n\r\n"},
      {"NUL in header",
       std::string("GET / HTTP/1.1\r\nHost: a.example\r\nX: a") + '\0' + "b\r\n\r\n"},
      {"control byte",
       "GET / HTTP/1.1\r\nHost: a.example\r\nX: a\x01"
       "b\r\n\r\n"},
      {"space before colon", "GET / HTTP/1.1\r\nHost : a.example\r\n\r\n"},
      {"no colon", "GET / HTTP/1.1\r\nHost a.example\r\n\r\n"},
      {"101 headers", "GET / HTTP/1.1\r\nHost: a.example\r\n" + hundred + "\r\n"},
      {"no Host", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"},
      {"two Hosts", "GET / HTTP/1.1\r\nHost: a.example\r\nhost: b.example\r\n\r\n"},
      {"empty Host", "GET / HTTP/1.1\r\nHost:\r\n\r\n"},
      {"Host userinfo", "GET / HTTP/1.1\r\nHost: a.example@b.example\r\n\r\n"},
      {"Host bad port", "GET / HTTP/1.1\r\nHost: a.example:0\r\n\r\n"},
      {"Host empty port", "GET / HTTP/1.1\r\nHost: a.example:\r\n\r\n"},
      {"Host huge port", "GET / HTTP/1.1\r\nHost: a.example:65536\r\n\r\n"},
      {"Host not a name", "GET / HTTP/1.1\r\nHost: a..example\r\n\r\n"},
      {"Host inet_aton form", "GET / HTTP/1.1\r\nHost: 127.1\r\n\r\n"},
      {"Host bare IPv6", "GET / HTTP/1.1\r\nHost: ::1\r\n\r\n"},
      {"absolute mismatch", "GET http://allowed.example/ HTTP/1.1\r\nHost: other.example\r\n\r\n"},
      {"absolute port mismatch", "GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example\r\n\r\n"},
      {"absolute userinfo", "GET http://a.example@b.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n"},
      {"https absolute", "GET https://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"},
      {"odd target form", "GET a.example/x HTTP/1.1\r\nHost: a.example\r\n\r\n"},
      {"asterisk not OPTIONS", "GET * HTTP/1.1\r\nHost: a.example\r\n\r\n"},
      {"CONNECT without port", "CONNECT a.example HTTP/1.1\r\n\r\n"},
      {"CONNECT origin form", "CONNECT /x HTTP/1.1\r\nHost: a.example\r\n\r\n"},
      {"CONNECT Host mismatch", "CONNECT a.example:443 HTTP/1.1\r\nHost: b.example:443\r\n\r\n"},
      {"CONNECT Host port mismatch",
       "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:8443\r\n\r\n"},
      {"too large", "GET / HTTP/1.1\r\nHost: a.example\r\nX: " + std::string(16400, 'a')},
  };
  for (const auto& [what, bytes] : cases) {
    HttpSniff sniff = Parse(bytes);
    EXPECT_EQ(sniff.result, HttpSniffResult::kInvalid) << what << ": " << sniff.reason;
    EXPECT_FALSE(sniff.reason.empty()) << what;
  }
}

TEST(HttpRequestHeadTest, AcceptsExactlyOneHundredHeadersAndSixteenKiB) {
  std::string ninety_nine;
  for (int i = 0; i < 99; ++i) {
    ninety_nine += "X-" + std::to_string(i) + ": v\r\n";
  }
  EXPECT_EQ(Parse("GET / HTTP/1.1\r\nHost: a.example\r\n" + ninety_nine + "\r\n").result,
            HttpSniffResult::kHttp);
  std::string prefix = "GET / HTTP/1.1\r\nHost: a.example\r\nX: ";
  std::string filler(kMaxRequestHeadSize - prefix.size() - 4, 'a');
  HttpSniff exact = Parse(prefix + filler + "\r\n\r\n");
  ASSERT_EQ(exact.result, HttpSniffResult::kHttp) << exact.reason;
  EXPECT_EQ(exact.head.head_size, kMaxRequestHeadSize);
  EXPECT_EQ(Parse(prefix + filler + "a\r\n\r\n").result, HttpSniffResult::kInvalid);
}

}  // namespace
}  // namespace abox::net
