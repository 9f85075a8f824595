#include "src/net/dns_message.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace abox::net {
namespace {

std::string U16(uint16_t v) {
  return std::string{static_cast<char>(v >> 8), static_cast<char>(v & 0xff)};
}

std::string Name(const std::vector<std::string>& labels) {
  std::string out;
  for (const auto& l : labels) {
    out += static_cast<char>(l.size()) + l;
  }
  return out + std::string(1, '\0');
}

// A stub resolver's query: RD set, one question, optionally an EDNS OPT record.
std::string Query(uint16_t id, const std::string& qname, uint16_t qtype, bool edns = false,
                  uint16_t flags = 0x0100, uint16_t qclass = kDnsClassIn) {
  std::string m = U16(id) + U16(flags) + U16(1) + U16(0) + U16(0) + U16(edns ? 1 : 0);
  m += qname + U16(qtype) + U16(qclass);
  if (edns) {
    m += std::string(1, '\0') + U16(kDnsTypeOpt) + U16(4096) + U16(0) + U16(0) + U16(4) + U16(10) +
         U16(0);  // one empty COOKIE-coded option
  }
  return m;
}

// `dig +noedns api.github.com A`-style query with a mixed-case name (as DNS 0x20 sends it).
const std::string kMixedCase = Query(0xbeef, Name({"Api", "GitHub", "com"}), kDnsTypeA);

TEST(DnsMessageTest, ParsesAStubQuery) {
  absl::StatusOr<DnsQuery> q = ParseDnsQuery(kMixedCase);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->id, 0xbeef);
  EXPECT_TRUE(q->recursion_desired);
  EXPECT_EQ(q->question.name, "api.github.com");
  EXPECT_EQ(q->question.qtype, kDnsTypeA);
  EXPECT_EQ(q->question.qclass, kDnsClassIn);
  EXPECT_FALSE(q->has_edns);
  EXPECT_EQ(MaxUdpResponseSize(*q), 512u);
}

TEST(DnsMessageTest, ToleratesEdnsAndClampsItsSize) {
  absl::StatusOr<DnsQuery> q = ParseDnsQuery(Query(7, Name({"pypi", "org"}), kDnsTypeAaaa, true));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE(q->has_edns);
  EXPECT_EQ(q->edns_udp_size, 4096);
  EXPECT_EQ(MaxUdpResponseSize(*q), kMaxEdnsUdpSize);
}

TEST(DnsMessageTest, AddressResponseEchoesIdAndQuestionAndReparses) {
  DnsQuery q = *ParseDnsQuery(kMixedCase);
  std::vector<IpAddress> addresses = {*IpAddress::Parse("140.82.112.6"),
                                      *IpAddress::Parse("2606:50c0::1"),
                                      *IpAddress::Parse("140.82.112.5")};
  std::string wire = BuildAddressResponse(q, addresses, 60);
  // The question is echoed byte for byte, case included.
  EXPECT_NE(wire.find(Name({"Api", "GitHub", "com"})), std::string::npos);
  absl::StatusOr<DnsResponse> r = ParseDnsResponse(wire);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id, 0xbeef);
  EXPECT_EQ(r->rcode, DnsRcode::kNoError);
  EXPECT_TRUE(r->recursion_desired);
  EXPECT_FALSE(r->truncated);
  ASSERT_TRUE(r->question.has_value());
  EXPECT_EQ(r->question->name, "api.github.com");
  ASSERT_EQ(r->answers.size(), 2u);  // the AAAA is not an answer to an A question
  EXPECT_EQ(r->answers[0].name, "api.github.com");
  EXPECT_EQ(r->answers[0].type, kDnsTypeA);
  EXPECT_EQ(r->answers[0].ttl, 60u);
  EXPECT_EQ(r->answers[0].rdata, std::string("\x8c\x52\x70\x06", 4));
  EXPECT_EQ(r->answers[1].rdata, std::string("\x8c\x52\x70\x05", 4));
}

TEST(DnsMessageTest, AaaaResponseCarriesOnlyIpv6AndOptWhenAsked) {
  DnsQuery q = *ParseDnsQuery(Query(9, Name({"a", "example"}), kDnsTypeAaaa, true));
  std::string wire = BuildAddressResponse(
      q, {*IpAddress::Parse("192.0.2.1"), *IpAddress::Parse("2001:db8::1")}, 30);
  absl::StatusOr<DnsResponse> r = ParseDnsResponse(wire);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->has_edns);
  ASSERT_EQ(r->answers.size(), 1u);
  EXPECT_EQ(r->answers[0].type, kDnsTypeAaaa);
  EXPECT_EQ(r->answers[0].rdata.size(), 16u);
}

TEST(DnsMessageTest, NoMatchingAddressesIsNoData) {
  DnsQuery q = *ParseDnsQuery(kMixedCase);
  for (const std::string& wire :
       {BuildAddressResponse(q, {*IpAddress::Parse("2001:db8::1")}, 30), BuildNoDataResponse(q)}) {
    absl::StatusOr<DnsResponse> r = ParseDnsResponse(wire);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->rcode, DnsRcode::kNoError);
    EXPECT_TRUE(r->answers.empty());
    EXPECT_EQ(r->question->name, "api.github.com");
  }
  DnsQuery txt = *ParseDnsQuery(Query(3, Name({"a", "example"}), 16));
  EXPECT_TRUE(ParseDnsResponse(BuildAddressResponse(txt, {*IpAddress::Parse("192.0.2.1")}, 30))
                  ->answers.empty());
}

TEST(DnsMessageTest, ErrorResponsesCarryTheirRcode) {
  DnsQuery q = *ParseDnsQuery(kMixedCase);
  for (DnsRcode rcode :
       {DnsRcode::kNxDomain, DnsRcode::kRefused, DnsRcode::kServFail, DnsRcode::kNotImp}) {
    absl::StatusOr<DnsResponse> r = ParseDnsResponse(BuildErrorResponse(q, rcode));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->rcode, rcode);
    EXPECT_EQ(r->id, 0xbeef);
    EXPECT_TRUE(r->answers.empty());
    EXPECT_EQ(r->question->name, "api.github.com");
  }
}

TEST(DnsMessageTest, TruncatesAnswersThatDoNotFitAndSetsTc) {
  DnsQuery q = *ParseDnsQuery(kMixedCase);
  std::vector<IpAddress> many;
  for (int i = 0; i < 100; ++i) {
    many.push_back(IpAddress::V4({140, 82, 112, static_cast<uint8_t>(i)}));
  }
  std::string wire = BuildAddressResponse(q, many, 60);
  EXPECT_LE(wire.size(), kMaxUdpDnsSize);
  absl::StatusOr<DnsResponse> r = ParseDnsResponse(wire);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->truncated);
  // 12 header + 20 question + 16 per answer.
  EXPECT_EQ(r->answers.size(), (512u - 12 - 20) / 16);
  absl::StatusOr<DnsResponse> tcp = ParseDnsResponse(BuildAddressResponse(q, many, 60, 65535));
  EXPECT_FALSE(tcp->truncated);
  EXPECT_EQ(tcp->answers.size(), 100u);
}

TEST(DnsMessageTest, ReadsRootAndUnderscoreNames) {
  absl::StatusOr<DnsQuery> root = ParseDnsQuery(Query(1, std::string(1, '\0'), 2));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->question.name, ".");
  absl::StatusOr<DnsQuery> srv =
      ParseDnsQuery(Query(1, Name({"_http", "_tcp", "A", "example"}), 33));
  ASSERT_TRUE(srv.ok()) << srv.status();
  EXPECT_EQ(srv->question.name, "_http._tcp.a.example");
}

TEST(DnsMessageTest, AcceptsNameLimitsExactly) {
  std::string l63(63, 'a');
  // 4 labels: 3 * 64 + 62 + 1 (root) = 255 wire bytes.
  std::string name255 = Name({l63, l63, l63, std::string(61, 'b')});
  ASSERT_EQ(name255.size(), 255u);
  EXPECT_TRUE(ParseDnsQuery(Query(1, name255, kDnsTypeA)).ok());
  EXPECT_FALSE(ParseDnsQuery(Query(1, Name({l63, l63, l63, std::string(62, 'b')}), 1)).ok());
  EXPECT_FALSE(ParseDnsQuery(Query(1, Name({l63 + "a", "example"}), 1)).ok());
}

TEST(DnsMessageTest, RefusesMalformedQueries) {
  std::string base = kMixedCase;
  std::string response = base;
  response[2] = static_cast<char>(0x81);
  std::string truncated_flag = base;
  truncated_flag[2] = static_cast<char>(0x03);
  std::vector<std::pair<const char*, std::string>> cases = {
      {"short", base.substr(0, 11)},
      {"response", response},
      {"TC set", truncated_flag},
      {"no question", U16(1) + U16(0x0100) + U16(0) + U16(0) + U16(0) + U16(0)},
      {"two questions", U16(1) + U16(0x0100) + U16(2) + U16(0) + U16(0) + U16(0) +
                            Name({"a", "b"}) + U16(1) + U16(1) + Name({"c", "d"}) + U16(1) +
                            U16(1)},
      {"answer in query", U16(1) + U16(0x0100) + U16(1) + U16(1) + U16(0) + U16(0) +
                              Name({"a", "b"}) + U16(1) + U16(1)},
      {"authority in query", U16(1) + U16(0x0100) + U16(1) + U16(0) + U16(1) + U16(0) +
                                 Name({"a", "b"}) + U16(1) + U16(1)},
      {"two additional", U16(1) + U16(0x0100) + U16(1) + U16(0) + U16(0) + U16(2) +
                             Name({"a", "b"}) + U16(1) + U16(1)},
      {"compression pointer", Query(1,
                                    std::string("\x01"
                                                "a\xc0\x0c",
                                                4),
                                    1)},
      {"extended label type", Query(1,
                                    std::string("\x41"
                                                "a",
                                                2) +
                                        '\0',
                                    1)},
      {"label runs off", base.substr(0, 14)},
      {"missing qtype", base.substr(0, base.size() - 3)},
      {"trailing byte", base + "x"},
      {"dot inside label", Query(1, Name({"a.b", "example"}), 1)},
      {"binary label", Query(1, Name({std::string("a\0b", 3), "example"}), 1)},
      {"space in label", Query(1, Name({"a b", "example"}), 1)},
      {"non-OPT additional", U16(1) + U16(0x0100) + U16(1) + U16(0) + U16(0) + U16(1) +
                                 Name({"a", "b"}) + U16(1) + U16(1) + std::string(1, '\0') +
                                 U16(1) + U16(1) + U16(0) + U16(0) + U16(0)},
      {"OPT truncated", Query(1, Name({"a", "b"}), 1, true).substr(0, 30)},
      {"OPT option runs off", U16(1) + U16(0x0100) + U16(1) + U16(0) + U16(0) + U16(1) +
                                  Name({"a", "b"}) + U16(1) + U16(1) + std::string(1, '\0') +
                                  U16(41) + U16(512) + U16(0) + U16(0) + U16(4) + U16(10) + U16(9)},
      {"EDNS version 1", U16(1) + U16(0x0100) + U16(1) + U16(0) + U16(0) + U16(1) +
                             Name({"a", "b"}) + U16(1) + U16(1) + std::string(1, '\0') + U16(41) +
                             U16(512) + U16(1) + U16(0) + U16(0)},
  };
  for (const auto& [what, bytes] : cases) {
    absl::StatusOr<DnsQuery> q = ParseDnsQuery(bytes);
    ASSERT_FALSE(q.ok()) << what;
    EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument) << what;
  }
}

TEST(DnsMessageTest, AnswersUnparsableQueriesWithFormerrOrNotimpButNeverResponses) {
  std::string bad = kMixedCase + "x";
  EXPECT_FALSE(ParseDnsQuery(bad).ok());
  absl::StatusOr<DnsResponse> formerr = ParseDnsResponse(*BuildResponseForUnparsable(bad));
  ASSERT_TRUE(formerr.ok()) << formerr.status();
  EXPECT_EQ(formerr->rcode, DnsRcode::kFormErr);
  EXPECT_EQ(formerr->id, 0xbeef);
  EXPECT_FALSE(formerr->question.has_value());

  std::string update = Query(5, Name({"a", "b"}), 1, false, 0x2800);  // opcode 5 UPDATE
  absl::StatusOr<DnsQuery> q = ParseDnsQuery(update);
  EXPECT_EQ(q.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ParseDnsResponse(*BuildResponseForUnparsable(update))->rcode, DnsRcode::kNotImp);

  std::string response = kMixedCase;
  response[2] = static_cast<char>(0x81);
  EXPECT_FALSE(BuildResponseForUnparsable(response).has_value());
  EXPECT_FALSE(BuildResponseForUnparsable("short").has_value());
}

TEST(DnsMessageTest, TcpFramingRoundTripsAndNeedsTheWholeMessage) {
  std::string framed = FrameDnsTcp(kMixedCase) + FrameDnsTcp("xy");
  absl::StatusOr<DnsTcpFrame> first = NextDnsTcpFrame(framed);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->complete);
  EXPECT_EQ(first->message, kMixedCase);
  EXPECT_EQ(first->consumed, kMixedCase.size() + 2);
  // The frame views the buffer given: keep the rest alive while reading it.
  std::string rest = framed.substr(first->consumed);
  absl::StatusOr<DnsTcpFrame> second = NextDnsTcpFrame(rest);
  ASSERT_TRUE(second.ok() && second->complete);
  EXPECT_EQ(second->message, "xy");
  for (size_t n = 0; n < kMixedCase.size() + 2; ++n) {
    absl::StatusOr<DnsTcpFrame> partial = NextDnsTcpFrame(framed.substr(0, n));
    ASSERT_TRUE(partial.ok());
    EXPECT_FALSE(partial->complete) << n;
  }
  EXPECT_FALSE(NextDnsTcpFrame(std::string(2, '\0')).ok());
}

TEST(DnsMessageTest, ResponseParserBoundsCompressionPointers) {
  std::string header = U16(1) + U16(0x8180) + U16(1) + U16(0) + U16(0) + U16(0);
  // A pointer to itself, and one pointing forward.
  EXPECT_FALSE(ParseDnsResponse(header + std::string("\xc0\x0c", 2) + U16(1) + U16(1)).ok());
  EXPECT_FALSE(ParseDnsResponse(header + std::string("\xc0\x20", 2) + U16(1) + U16(1)).ok());
  EXPECT_FALSE(ParseDnsResponse(kMixedCase).ok());  // a query is not a response
}

}  // namespace
}  // namespace abox::net
