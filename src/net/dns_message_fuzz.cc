// libFuzzer target: DNS queries from the guest are hostile. The parser must never crash or
// loop; every response built for a parsed query must parse back with the same id and name and
// respect its size limit; an unparsable query gets at most a header-only answer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "src/net/dns_message.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

void CheckResponse(const abox::net::DnsQuery& q, const std::string& wire, size_t max_size) {
  Check(wire.size() <= max_size);
  auto r = abox::net::ParseDnsResponse(wire);
  Check(r.ok());
  Check(r->id == q.id);
  Check(r->question.has_value() && r->question->name == q.question.name);
  Check(r->has_edns == q.has_edns);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The response parser follows compression pointers: it must stay bounded too.
  (void)abox::net::ParseDnsResponse(bytes);
  auto frame = abox::net::NextDnsTcpFrame(bytes);
  if (frame.ok() && frame->complete) {
    Check(frame->consumed == frame->message.size() + 2 && frame->consumed <= size);
  }

  auto query = abox::net::ParseDnsQuery(bytes);
  if (!query.ok()) {
    auto reply = abox::net::BuildResponseForUnparsable(bytes);
    if (reply) {
      auto r = abox::net::ParseDnsResponse(*reply);
      Check(r.ok() && r->answers.empty());
    }
    return 0;
  }
  Check(!query->question.name.empty() && query->question.name.size() <= 253);
  for (char c : query->question.name) {
    Check(c == '.' || c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'));
  }
  using abox::net::DnsRcode;
  size_t udp = abox::net::MaxUdpResponseSize(*query);
  for (DnsRcode rcode : {DnsRcode::kNxDomain, DnsRcode::kRefused, DnsRcode::kServFail}) {
    CheckResponse(*query, abox::net::BuildErrorResponse(*query, rcode), 65535);
  }
  CheckResponse(*query, abox::net::BuildNoDataResponse(*query), 65535);
  std::vector<abox::net::IpAddress> addresses;
  for (size_t i = 0; i < 64; ++i) {
    addresses.push_back(abox::net::IpAddress::V4({93, 184, 215, static_cast<uint8_t>(i)}));
    addresses.push_back(abox::net::IpAddress::V6(
        {0x26, 0x06, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(i)}));
  }
  std::string wire = abox::net::BuildAddressResponse(*query, addresses, 60, udp);
  CheckResponse(*query, wire, udp);
  Check(abox::net::NextDnsTcpFrame(abox::net::FrameDnsTcp(wire))->message == wire);
  return 0;
}
