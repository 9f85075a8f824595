#include "src/net/dns_message.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace abox::net {
namespace {

constexpr size_t kHeaderSize = 12;
constexpr size_t kMaxNameWire = 255;  // RFC 1035 3.1
constexpr uint16_t kFlagQr = 0x8000;
constexpr uint16_t kFlagTc = 0x0200;
constexpr uint16_t kFlagRd = 0x0100;
constexpr uint16_t kFlagRa = 0x0080;
constexpr uint16_t kFlagCd = 0x0010;
constexpr int kMaxPointerHops = 16;

absl::Status Bad(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("malformed DNS message: ", why));
}

uint16_t Get16(absl::string_view m, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(m[at]) << 8) |
                               static_cast<uint8_t>(m[at + 1]));
}
uint32_t Get32(absl::string_view m, size_t at) {
  return (static_cast<uint32_t>(Get16(m, at)) << 16) | Get16(m, at + 2);
}
void Put16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v & 0xff));
}
void Put32(std::string* out, uint32_t v) {
  Put16(out, static_cast<uint16_t>(v >> 16));
  Put16(out, static_cast<uint16_t>(v & 0xffff));
}

// Label bytes that survive as dotted text: LDH plus '_' (SRV-style names like _http._tcp).
// Anything else ('.', spaces, binary) could not be compared or logged unambiguously.
bool IsLabelByte(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

// Reads a name at *pos. Compression pointers are followed only when `allow_pointers` (in
// responses), at most kMaxPointerHops and only backwards, so a loop cannot hang the reader.
absl::StatusOr<std::string> ReadName(absl::string_view m, size_t* pos, bool allow_pointers) {
  std::string name;
  size_t at = *pos;
  size_t wire = 0;
  int hops = 0;
  bool jumped = false;
  while (true) {
    if (at >= m.size()) {
      return Bad("name runs past the end");
    }
    uint8_t len = static_cast<uint8_t>(m[at]);
    if ((len & 0xc0) == 0xc0) {
      if (!allow_pointers) {
        return Bad("compression pointer in a query name");
      }
      if (at + 1 >= m.size()) {
        return Bad("truncated compression pointer");
      }
      size_t target = ((len & 0x3f) << 8) | static_cast<uint8_t>(m[at + 1]);
      if (target >= at || ++hops > kMaxPointerHops) {
        return Bad("compression pointer loops or points forward");
      }
      if (!jumped) {
        *pos = at + 2;
        jumped = true;
      }
      at = target;
      continue;
    }
    if ((len & 0xc0) != 0) {
      return Bad("unknown label type");
    }
    wire += 1 + len;
    if (wire > kMaxNameWire) {
      return Bad("name longer than 255 bytes");
    }
    if (len == 0) {
      if (!jumped) {
        *pos = at + 1;
      }
      return name.empty() ? std::string(".") : name;
    }
    if (at + 1 + len > m.size()) {
      return Bad("label runs past the end");
    }
    absl::string_view label = m.substr(at + 1, len);
    for (char c : label) {
      if (!IsLabelByte(c)) {
        return Bad("name has a byte other than letters, digits, '-' and '_'");
      }
    }
    if (!name.empty()) {
      name.push_back('.');
    }
    name += absl::AsciiStrToLower(label);
    at += 1 + len;
  }
}

std::string Header(uint16_t id, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ar) {
  std::string out;
  Put16(&out, id);
  Put16(&out, flags);
  Put16(&out, qd);
  Put16(&out, an);
  Put16(&out, 0);
  Put16(&out, ar);
  return out;
}

// A response's header and question; answers are appended by the caller, then the OPT record.
std::string Begin(const DnsQuery& query, DnsRcode rcode, uint16_t answers, bool truncated) {
  uint16_t flags = kFlagQr | kFlagRa | static_cast<uint16_t>(rcode);
  if (query.recursion_desired) {
    flags |= kFlagRd;
  }
  if (query.checking_disabled) {
    flags |= kFlagCd;
  }
  if (truncated) {
    flags |= kFlagTc;
  }
  std::string out = Header(query.id, flags, 1, answers, query.has_edns ? 1 : 0);
  out += query.question_wire;
  return out;
}

// RFC 6891 6.1.1: a response to an EDNS query carries an OPT record too.
constexpr size_t kOptSize = 11;
void AppendOpt(const DnsQuery& query, std::string* out) {
  if (!query.has_edns) {
    return;
  }
  out->push_back('\0');  // root name
  Put16(out, kDnsTypeOpt);
  Put16(out, static_cast<uint16_t>(kMaxEdnsUdpSize));
  Put32(out, 0);  // extended rcode, version 0, no flags
  Put16(out, 0);  // no options
}

}  // namespace

absl::StatusOr<DnsQuery> ParseDnsQuery(absl::string_view m) {
  if (m.size() < kHeaderSize) {
    return Bad("shorter than a header");
  }
  if (m.size() > kMaxTcpDnsSize) {
    return Bad("longer than 65535 bytes");
  }
  uint16_t flags = Get16(m, 2);
  if (flags & kFlagQr) {
    return Bad("it is a response, not a query");
  }
  if (((flags >> 11) & 0xf) != 0) {
    return absl::UnimplementedError(
        absl::StrCat("DNS opcode ", (flags >> 11) & 0xf, " is not supported (only QUERY)"));
  }
  if (flags & kFlagTc) {
    return Bad("a query with the TC bit");
  }
  if (Get16(m, 4) != 1) {
    return Bad("a query must have exactly one question");
  }
  if (Get16(m, 6) != 0 || Get16(m, 8) != 0) {
    return Bad("a query must have no answer or authority records");
  }
  uint16_t additional = Get16(m, 10);
  if (additional > 1) {
    return Bad("more than one additional record (only an EDNS OPT is accepted)");
  }
  DnsQuery query;
  query.id = Get16(m, 0);
  query.recursion_desired = (flags & kFlagRd) != 0;
  query.checking_disabled = (flags & kFlagCd) != 0;
  size_t pos = kHeaderSize;
  absl::StatusOr<std::string> name = ReadName(m, &pos, /*allow_pointers=*/false);
  if (!name.ok()) {
    return name.status();
  }
  if (pos + 4 > m.size()) {
    return Bad("question is truncated");
  }
  query.question.name = *std::move(name);
  query.question.qtype = Get16(m, pos);
  query.question.qclass = Get16(m, pos + 2);
  pos += 4;
  query.question_wire = std::string(m.substr(kHeaderSize, pos - kHeaderSize));
  if (additional == 1) {
    // OPT pseudo-record: root name, type 41, class = UDP size, TTL = ext-rcode/version/flags.
    if (pos + 11 > m.size() || m[pos] != '\0' || Get16(m, pos + 1) != kDnsTypeOpt) {
      return Bad("the additional record is not an EDNS OPT record");
    }
    query.has_edns = true;
    query.edns_udp_size = Get16(m, pos + 3);
    uint8_t version = static_cast<uint8_t>(m[pos + 6]);
    if (version != 0) {
      return Bad(absl::StrCat("EDNS version ", version, " (only 0)"));
    }
    size_t rdlength = Get16(m, pos + 9);
    pos += 11;
    if (pos + rdlength > m.size()) {
      return Bad("OPT record data runs past the end");
    }
    size_t end = pos + rdlength;
    while (pos < end) {  // Options are ignored but must be well-formed.
      if (pos + 4 > end || pos + 4 + Get16(m, pos + 2) > end) {
        return Bad("truncated EDNS option");
      }
      pos += 4 + Get16(m, pos + 2);
    }
  }
  if (pos != m.size()) {
    return Bad("bytes after the last record");
  }
  return query;
}

std::optional<std::string> BuildResponseForUnparsable(absl::string_view m) {
  if (m.size() < kHeaderSize || (Get16(m, 2) & kFlagQr)) {
    return std::nullopt;
  }
  uint16_t flags = Get16(m, 2);
  uint16_t opcode = (flags >> 11) & 0xf;
  DnsRcode rcode = opcode != 0 ? DnsRcode::kNotImp : DnsRcode::kFormErr;
  uint16_t out_flags =
      kFlagQr | kFlagRa | (opcode << 11) | (flags & kFlagRd) | static_cast<uint16_t>(rcode);
  return Header(Get16(m, 0), out_flags, 0, 0, 0);
}

std::string BuildErrorResponse(const DnsQuery& query, DnsRcode rcode) {
  std::string out = Begin(query, rcode, 0, false);
  AppendOpt(query, &out);
  return out;
}

std::string BuildNoDataResponse(const DnsQuery& query) {
  return BuildErrorResponse(query, DnsRcode::kNoError);
}

std::string BuildAddressResponse(const DnsQuery& query, const std::vector<IpAddress>& addresses,
                                 uint32_t ttl, size_t max_size) {
  std::vector<const IpAddress*> fit;
  size_t size = kHeaderSize + query.question_wire.size() + (query.has_edns ? kOptSize : 0);
  bool truncated = false;
  if (query.question.qclass == kDnsClassIn) {
    for (const IpAddress& address : addresses) {
      bool wanted = address.is_v4() ? query.question.qtype == kDnsTypeA
                                    : query.question.qtype == kDnsTypeAaaa;
      if (!wanted) {
        continue;
      }
      size_t record = 2 + 2 + 2 + 4 + 2 + address.size();
      if (size + record > max_size || fit.size() == 0xffff) {
        truncated = true;
        break;
      }
      size += record;
      fit.push_back(&address);
    }
  }
  std::string out = Begin(query, DnsRcode::kNoError, static_cast<uint16_t>(fit.size()), truncated);
  for (const IpAddress* address : fit) {
    Put16(&out, 0xc000 | kHeaderSize);  // the question's name
    Put16(&out, address->is_v4() ? kDnsTypeA : kDnsTypeAaaa);
    Put16(&out, kDnsClassIn);
    Put32(&out, ttl);
    Put16(&out, static_cast<uint16_t>(address->size()));
    out.append(reinterpret_cast<const char*>(address->bytes().data()), address->size());
  }
  AppendOpt(query, &out);
  return out;
}

size_t MaxUdpResponseSize(const DnsQuery& query) {
  if (!query.has_edns) {
    return kMaxUdpDnsSize;
  }
  return std::min(kMaxEdnsUdpSize, std::max<size_t>(kMaxUdpDnsSize, query.edns_udp_size));
}

std::string FrameDnsTcp(absl::string_view message) {
  if (message.size() > kMaxTcpDnsSize) {
    std::abort();  // A local bug: responses are built far below this.
  }
  std::string out;
  Put16(&out, static_cast<uint16_t>(message.size()));
  out.append(message.data(), message.size());
  return out;
}

absl::StatusOr<DnsTcpFrame> NextDnsTcpFrame(absl::string_view buffer) {
  DnsTcpFrame frame;
  if (buffer.size() < 2) {
    return frame;
  }
  size_t length = Get16(buffer, 0);
  if (length == 0) {
    return absl::InvalidArgumentError("DNS over TCP: zero-length message");
  }
  if (buffer.size() < 2 + length) {
    return frame;
  }
  frame.complete = true;
  frame.message = buffer.substr(2, length);
  frame.consumed = 2 + length;
  return frame;
}

absl::StatusOr<DnsResponse> ParseDnsResponse(absl::string_view m) {
  if (m.size() < kHeaderSize) {
    return Bad("shorter than a header");
  }
  uint16_t flags = Get16(m, 2);
  if (!(flags & kFlagQr)) {
    return Bad("it is a query, not a response");
  }
  DnsResponse response;
  response.id = Get16(m, 0);
  response.rcode = static_cast<DnsRcode>(flags & 0xf);
  response.truncated = (flags & kFlagTc) != 0;
  response.recursion_desired = (flags & kFlagRd) != 0;
  uint16_t questions = Get16(m, 4);
  uint16_t answers = Get16(m, 6);
  uint16_t authority = Get16(m, 8);
  uint16_t additional = Get16(m, 10);
  if (questions > 1 || authority != 0) {
    return Bad("more than one question or an authority section");
  }
  size_t pos = kHeaderSize;
  if (questions == 1) {
    absl::StatusOr<std::string> name = ReadName(m, &pos, /*allow_pointers=*/true);
    if (!name.ok()) {
      return name.status();
    }
    if (pos + 4 > m.size()) {
      return Bad("question is truncated");
    }
    response.question = DnsQuestion{*std::move(name), Get16(m, pos), Get16(m, pos + 2)};
    pos += 4;
  }
  for (uint32_t i = 0; i < uint32_t{answers} + additional; ++i) {
    DnsAnswer rr;
    absl::StatusOr<std::string> name = ReadName(m, &pos, /*allow_pointers=*/true);
    if (!name.ok()) {
      return name.status();
    }
    if (pos + 10 > m.size()) {
      return Bad("record is truncated");
    }
    rr.name = *std::move(name);
    rr.type = Get16(m, pos);
    rr.rr_class = Get16(m, pos + 2);
    rr.ttl = Get32(m, pos + 4);
    size_t rdlength = Get16(m, pos + 8);
    pos += 10;
    if (pos + rdlength > m.size()) {
      return Bad("record data runs past the end");
    }
    rr.rdata = std::string(m.substr(pos, rdlength));
    pos += rdlength;
    if (i >= answers) {
      if (rr.type != kDnsTypeOpt) {
        return Bad("additional record other than OPT");
      }
      response.has_edns = true;
    } else {
      response.answers.push_back(std::move(rr));
    }
  }
  if (pos != m.size()) {
    return Bad("bytes after the last record");
  }
  return response;
}

}  // namespace abox::net
