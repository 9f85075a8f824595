// DNS messages for the host resolver that answers the guest (RFC 1035, EDNS from RFC 6891).
//
// The guest's only resolver is the host: it parses one query, the policy decides the name,
// and the host answers with addresses it resolved itself, or NXDOMAIN / REFUSED / SERVFAIL.
// Trust boundary: queries are hostile guest bytes. The parser accepts exactly what a stub
// resolver sends (one question, no compression, at most an EDNS OPT record) and refuses the
// rest. Names here are just names: a query for "<data>.denied.example" is decided (and
// logged) by the policy like any other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/address_filter.h"

namespace abox::net {

inline constexpr uint16_t kDnsTypeA = 1;
inline constexpr uint16_t kDnsTypeAaaa = 28;
inline constexpr uint16_t kDnsTypeOpt = 41;
inline constexpr uint16_t kDnsClassIn = 1;
// Plain DNS over UDP (RFC 1035 4.2.1); larger answers need EDNS or TCP.
inline constexpr size_t kMaxUdpDnsSize = 512;
// Largest UDP answer with EDNS: the DNS flag day 2020 value, below common path MTUs.
inline constexpr size_t kMaxEdnsUdpSize = 1232;
inline constexpr size_t kMaxTcpDnsSize = 65535;

enum class DnsRcode : uint8_t {
  kNoError = 0,
  kFormErr = 1,
  kServFail = 2,
  kNxDomain = 3,
  kNotImp = 4,
  kRefused = 5,
};

struct DnsQuestion {
  std::string name;  // lowercase, dotted, no trailing dot; "." for the root
  uint16_t qtype = 0;
  uint16_t qclass = 0;
};

struct DnsQuery {
  uint16_t id = 0;
  bool recursion_desired = false;
  bool checking_disabled = false;
  DnsQuestion question;
  // QNAME + QTYPE + QCLASS exactly as sent, echoed in responses: resolvers that randomise
  // the case of names (DNS 0x20) check that the answer repeats it.
  std::string question_wire;
  bool has_edns = false;
  uint16_t edns_udp_size = 0;  // the client's advertised UDP size when has_edns
};

// Parses one query message (without TCP framing). Errors are InvalidArgument (answer FORMERR)
// or Unimplemented for an opcode other than QUERY (answer NOTIMP); see
// BuildResponseForUnparsable.
[[nodiscard]] absl::StatusOr<DnsQuery> ParseDnsQuery(absl::string_view message);

// The answer to a message ParseDnsQuery refused: FORMERR (NOTIMP for another opcode) with the
// id echoed and no question. nullopt when the message should get no answer at all: shorter
// than a header, or a response (answering those could start a loop).
std::optional<std::string> BuildResponseForUnparsable(absl::string_view message);

// NXDOMAIN, REFUSED, SERVFAIL or NOTIMP (any rcode) echoing the query's id and question.
std::string BuildErrorResponse(const DnsQuery& query, DnsRcode rcode);
// NOERROR with no answers: the name exists but has no record of that type.
std::string BuildNoDataResponse(const DnsQuery& query);
// NOERROR answering an IN A / AAAA question with the addresses of its family, each with `ttl`
// seconds; addresses of the other family are skipped (none left: NODATA). Answers that would
// make the message larger than `max_size` are dropped and TC is set, so the client retries
// over TCP.
std::string BuildAddressResponse(const DnsQuery& query, const std::vector<IpAddress>& addresses,
                                 uint32_t ttl, size_t max_size = kMaxUdpDnsSize);
// What a UDP answer to `query` may use: 512, or its EDNS size within [512, 1232].
size_t MaxUdpResponseSize(const DnsQuery& query);

// DNS over TCP (RFC 1035 4.2.2): a 2-byte big-endian length before each message.
// Aborts when message is larger than kMaxTcpDnsSize (a local bug).
std::string FrameDnsTcp(absl::string_view message);
struct DnsTcpFrame {
  bool complete = false;      // false: need more bytes
  absl::string_view message;  // points into the buffer given
  size_t consumed = 0;        // bytes of the buffer this frame used (2 + message size)
};
// The first frame in `buffer`; InvalidArgument for a zero-length frame.
[[nodiscard]] absl::StatusOr<DnsTcpFrame> NextDnsTcpFrame(absl::string_view buffer);

// A parsed response, for tests, the fuzz target and end-to-end checks of what the resolver
// sends (compression pointers followed, bounded).
struct DnsAnswer {
  std::string name;
  uint16_t type = 0;
  uint16_t rr_class = 0;
  uint32_t ttl = 0;
  std::string rdata;
};
struct DnsResponse {
  uint16_t id = 0;
  DnsRcode rcode = DnsRcode::kNoError;
  bool truncated = false;
  bool recursion_desired = false;
  std::optional<DnsQuestion> question;
  std::vector<DnsAnswer> answers;
  bool has_edns = false;
};
[[nodiscard]] absl::StatusOr<DnsResponse> ParseDnsResponse(absl::string_view message);

}  // namespace abox::net
