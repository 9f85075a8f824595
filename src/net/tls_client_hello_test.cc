#include "src/net/tls_client_hello.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace abox::net {
namespace {

// `openssl s_client -connect 127.0.0.1:PORT -servername x.example -alpn h2,http/1.1` (OpenSSL
// 3.0), captured by a local listener: one 333-byte record.
const unsigned char kOpensslClientHello[] = {
    0x16, 0x03, 0x01, 0x01, 0x48, 0x01, 0x00, 0x01, 0x44, 0x03, 0x03, 0x0b, 0x21, 0x69, 0x06, 0xe7,
    0x3b, 0x2d, 0x06, 0x09, 0x01, 0xa7, 0x61, 0x14, 0xcb, 0x7e, 0x2c, 0xb2, 0x32, 0x44, 0xac, 0xcd,
    0x79, 0xc8, 0x4b, 0x08, 0x7a, 0xac, 0xd5, 0xb7, 0xe0, 0x10, 0xf1, 0x20, 0x0e, 0x2c, 0xdb, 0xe6,
    0x9b, 0x2f, 0xaf, 0xc0, 0x88, 0x52, 0x91, 0x9e, 0xc4, 0xb2, 0x5d, 0xfc, 0x62, 0xc7, 0x02, 0xf8,
    0x85, 0xec, 0x63, 0x48, 0x22, 0x4c, 0x11, 0xb7, 0x09, 0xbd, 0x0a, 0x30, 0x00, 0x3e, 0x13, 0x02,
    0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
    0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23, 0xc0, 0x27,
    0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39, 0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d,
    0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xbd,
    0x00, 0x00, 0x00, 0x0e, 0x00, 0x0c, 0x00, 0x00, 0x09, 0x78, 0x2e, 0x65, 0x78, 0x61, 0x6d, 0x70,
    0x6c, 0x65, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14,
    0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02,
    0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x10, 0x00, 0x0e, 0x00, 0x0c, 0x02, 0x68,
    0x32, 0x08, 0x68, 0x74, 0x74, 0x70, 0x2f, 0x31, 0x2e, 0x31, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17,
    0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07,
    0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01,
    0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02,
    0x00, 0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00, 0x2d, 0x00,
    0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0x60, 0x67, 0xec,
    0x09, 0x60, 0x1a, 0xb7, 0x31, 0x60, 0x8d, 0x99, 0x20, 0x55, 0xcb, 0x55, 0x78, 0x5e, 0xb9, 0xe5,
    0x77, 0xab, 0x31, 0x99, 0x9d, 0xef, 0x2e, 0xb0, 0x56, 0x5c, 0xcf, 0x0f, 0x7e,
};

std::string Captured() {
  return std::string(reinterpret_cast<const char*>(kOpensslClientHello),
                     sizeof(kOpensslClientHello));
}

std::string U8(size_t v) { return std::string(1, static_cast<char>(v)); }
std::string U16(size_t v) { return U8(v >> 8) + U8(v & 0xff); }
std::string U24(size_t v) { return U8(v >> 16) + U16(v & 0xffff); }

std::string Ext(uint16_t type, const std::string& data) {
  return U16(type) + U16(data.size()) + data;
}

std::string SniExt(const std::string& name, uint8_t type = 0) {
  std::string entry = U8(type) + U16(name.size()) + name;
  return Ext(0, U16(entry.size()) + entry);
}

std::string AlpnExt(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names) {
    list += U8(n.size()) + n;
  }
  return Ext(16, U16(list.size()) + list);
}

// A TLS 1.2-layout ClientHello body: one cipher suite, null compression, then `extensions`
// (no extensions block at all when nullopt).
std::string Body(const std::optional<std::string>& extensions, const std::string& session_id = "") {
  std::string body = "\x03\x03" + std::string(32, 'r') + U8(session_id.size()) + session_id +
                     U16(2) + "\x13\x01" + U8(1) + std::string(1, '\0');
  if (extensions) {
    body += U16(extensions->size()) + *extensions;
  }
  return body;
}

std::string Handshake(const std::string& body, uint8_t type = 1) {
  return U8(type) + U24(body.size()) + body;
}

// Splits handshake bytes into handshake records of at most `chunk` bytes.
std::string Records(const std::string& handshake, size_t chunk = 16384) {
  std::string out;
  for (size_t at = 0; at < handshake.size(); at += chunk) {
    std::string piece = handshake.substr(at, chunk);
    out += "\x16\x03\x01" + U16(piece.size()) + piece;
  }
  return out;
}

std::string Hello(const std::string& extensions) { return Records(Handshake(Body(extensions))); }

TEST(TlsClientHelloTest, ReadsSniAndAlpnFromARealOpensslHello) {
  TlsSniff sniff = SniffClientHello(Captured());
  ASSERT_EQ(sniff.result, SniffResult::kTls) << sniff.reason;
  EXPECT_EQ(sniff.hello.server_name, "x.example");
  EXPECT_EQ(sniff.hello.alpn, (std::vector<std::string>{"h2", "http/1.1"}));
  EXPECT_EQ(sniff.hello.legacy_version, 0x0303);
  EXPECT_FALSE(sniff.hello.has_ech);
  EXPECT_EQ(sniff.hello.record_bytes, sizeof(kOpensslClientHello));
}

TEST(TlsClientHelloTest, NeedsMoreForEveryProperPrefix) {
  std::string all = Captured();
  for (size_t n = 0; n < all.size(); ++n) {
    EXPECT_EQ(SniffClientHello(all.substr(0, n)).result, SniffResult::kNeedMore) << n;
  }
}

TEST(TlsClientHelloTest, ByteByByteFeedKeepsEveryByteForForwarding) {
  std::string all = Captured() + "early";  // bytes after the hello are kept too
  ClientHelloSniffer sniffer;
  SniffResult last = SniffResult::kNeedMore;
  size_t fed = 0;
  while (last == SniffResult::kNeedMore && fed < all.size()) {
    last = sniffer.Feed(all.substr(fed++, 1)).result;
  }
  ASSERT_EQ(last, SniffResult::kTls);
  EXPECT_EQ(fed, sizeof(kOpensslClientHello));
  EXPECT_EQ(sniffer.bytes(), Captured());
  // Final: later data is neither parsed nor buffered.
  EXPECT_EQ(sniffer.Feed("more").result, SniffResult::kTls);
  EXPECT_EQ(sniffer.bytes(), Captured());
}

TEST(TlsClientHelloTest, AssemblesAHelloSplitAcrossRecords) {
  std::string handshake = Handshake(Body(SniExt("split.example") + AlpnExt({"h2"})));
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{4}, size_t{17}, size_t{100}}) {
    TlsSniff sniff = SniffClientHello(Records(handshake, chunk));
    ASSERT_EQ(sniff.result, SniffResult::kTls) << chunk << ": " << sniff.reason;
    EXPECT_EQ(sniff.hello.server_name, "split.example");
    EXPECT_EQ(sniff.hello.alpn, std::vector<std::string>{"h2"});
  }
}

TEST(TlsClientHelloTest, AcceptsAHelloLargerThanOneRecord) {
  // A padding extension pushes the hello past 2^14, as large post-quantum hellos may.
  std::string exts = SniExt("big.example") + Ext(21, std::string(20000, '\0'));
  TlsSniff sniff = SniffClientHello(Records(Handshake(Body(exts))));
  ASSERT_EQ(sniff.result, SniffResult::kTls) << sniff.reason;
  EXPECT_EQ(sniff.hello.server_name, "big.example");
}

TEST(TlsClientHelloTest, NormalisesTheServerName) {
  TlsSniff sniff = SniffClientHello(Hello(SniExt("API.GitHub.COM.")));
  ASSERT_EQ(sniff.result, SniffResult::kTls) << sniff.reason;
  EXPECT_EQ(sniff.hello.server_name, "api.github.com");
}

TEST(TlsClientHelloTest, ReportsNoSniDistinctly) {
  TlsSniff no_sni = SniffClientHello(Hello(AlpnExt({"http/1.1"})));
  ASSERT_EQ(no_sni.result, SniffResult::kTls) << no_sni.reason;
  EXPECT_FALSE(no_sni.hello.server_name.has_value());
  TlsSniff no_extensions = SniffClientHello(Records(Handshake(Body(std::nullopt))));
  ASSERT_EQ(no_extensions.result, SniffResult::kTls) << no_extensions.reason;
  EXPECT_FALSE(no_extensions.hello.server_name.has_value());
}

TEST(TlsClientHelloTest, FlagsEncryptedClientHello) {
  TlsSniff sniff = SniffClientHello(Hello(SniExt("public.example") + Ext(0xfe0d, "ech")));
  ASSERT_EQ(sniff.result, SniffResult::kTls) << sniff.reason;
  EXPECT_TRUE(sniff.hello.has_ech);
  EXPECT_EQ(sniff.hello.server_name, "public.example");
}

TEST(TlsClientHelloTest, SaysNotTlsFromTheFirstBytes) {
  EXPECT_EQ(SniffClientHello("G").result, SniffResult::kNotTls);
  EXPECT_EQ(SniffClientHello("GET / HTTP/1.1\r\n").result, SniffResult::kNotTls);
  EXPECT_EQ(SniffClientHello("SSH-2.0-OpenSSH_9.6\r\n").result, SniffResult::kNotTls);
  EXPECT_EQ(SniffClientHello(std::string("\x16\x02", 2)).result, SniffResult::kNotTls);
  EXPECT_EQ(SniffClientHello(std::string("\x16\x03\x05", 3)).result, SniffResult::kNotTls);
  EXPECT_EQ(SniffClientHello(std::string("\x16\x03", 2)).result, SniffResult::kNeedMore);
}

struct InvalidCase {
  const char* what;
  std::string bytes;
};

TEST(TlsClientHelloTest, RefusesBadServerNames) {
  std::vector<InvalidCase> cases = {
      {"IPv4 literal", Hello(SniExt("192.0.2.1"))},
      {"IPv6 literal", Hello(SniExt("2001:db8::1"))},
      {"underscore", Hello(SniExt("a_b.example"))},
      {"NUL inside", Hello(SniExt(std::string("a.example\0.evil", 15)))},
      {"non-ASCII", Hello(SniExt("b\xc3\xbc"
                                 "cher.example"))},
      {"empty name", Hello(SniExt(""))},
      {"too long", Hello(SniExt(std::string(250, 'a') + ".example"))},
      {"not host_name type", Hello(SniExt("a.example", 1))},
      {"two entries",
       Hello(Ext(0, U16(2 * 12) + U8(0) + U16(9) + "a.example" + U8(0) + U16(9) + "b.example"))},
      {"empty list", Hello(Ext(0, U16(0)))},
      {"empty extension", Hello(Ext(0, ""))},
      {"list length lies", Hello(Ext(0, U16(50) + U8(0) + U16(9) + "a.example"))},
      {"two SNI extensions", Hello(SniExt("a.example") + SniExt("b.example"))},
  };
  for (const auto& c : cases) {
    TlsSniff sniff = SniffClientHello(c.bytes);
    EXPECT_EQ(sniff.result, SniffResult::kInvalid) << c.what;
    EXPECT_FALSE(sniff.reason.empty()) << c.what;
  }
}

TEST(TlsClientHelloTest, RefusesMalformedStructure) {
  std::string good_body = Body(SniExt("a.example"));
  std::string handshake = Handshake(good_body);
  std::vector<InvalidCase> cases = {
      {"zero-length record", std::string("\x16\x03\x01\x00\x00", 5)},
      {"record over 2^14", "\x16\x03\x01" + U16(16385) + std::string(16385, '\x01')},
      {"not a ClientHello", Records(Handshake(good_body, 2))},
      {"hello over the limit", Records(U8(1) + U24(kMaxClientHelloLength + 1))},
      {"alert between fragments",
       Records(handshake.substr(0, 10)) + "\x15\x03\x03" + U16(2) + "\x02\x28"},
      {"bad continuation version",
       Records(handshake.substr(0, 10)) + "\x16\x02\x00" + U16(1) + "x"},
      {"handshake data after the hello", Records(handshake + "\x01")},
      {"truncated body", Records(Handshake(good_body.substr(0, 20)))},
      {"session id over 32", Records(Handshake(Body(SniExt("a.example"), std::string(33, 's'))))},
      {"odd cipher suites", Records(Handshake("\x03\x03" + std::string(32, 'r') + U8(0) + U16(1) +
                                              "x" + U8(1) + std::string(1, '\0')))},
      {"no compression methods",
       Records(Handshake("\x03\x03" + std::string(32, 'r') + U8(0) + U16(2) + "\x13\x01" + U8(0)))},
      {"extensions length lies", Records(Handshake(good_body + "x"))},
      {"truncated extension", Hello(U16(0) + U8(0))},
      {"duplicate extension", Hello(Ext(23, "") + Ext(23, ""))},
      {"not TLS client version", Records(Handshake("\x02\x00" + good_body.substr(2)))},
      {"bad ALPN", Hello(Ext(16, U16(1) + U8(0)))},
      {"empty ALPN name", Hello(Ext(16, U16(3) + U8(0) + U8(1) + "x"))},
  };
  for (const auto& c : cases) {
    TlsSniff sniff = SniffClientHello(c.bytes);
    EXPECT_EQ(sniff.result, SniffResult::kInvalid) << c.what;
    EXPECT_FALSE(sniff.reason.empty()) << c.what;
  }
}

TEST(TlsClientHelloTest, BoundsTheRecordBytesOfOneHello) {
  // 1-byte records cost 6 bytes each: a 12 KiB hello so split exceeds the 64 KiB budget.
  std::string handshake = Handshake(Body(Ext(21, std::string(12000, '\0'))));
  TlsSniff sniff = SniffClientHello(Records(handshake, 1));
  EXPECT_EQ(sniff.result, SniffResult::kInvalid);
  EXPECT_NE(sniff.reason.find("spans more than"), std::string::npos) << sniff.reason;
}

}  // namespace
}  // namespace abox::net
