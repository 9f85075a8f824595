#include "src/net/address_filter.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace abox::net {
namespace {

// Where an IPv6 range carries an IPv4 address that decides instead.
enum class Embedded : uint8_t { kNone, kLast32Bits, kBits16To48 };

struct RangeRow {
  const char* prefix;  // "10.0.0.0/8"
  AddressClass address_class;
  const char* reason;
  Embedded embedded = Embedded::kNone;
};

// First match wins, so a narrower row comes before the range that contains it.
// Sources: IANA IPv4/IPv6 Special-Purpose Address Registries (RFC 6890 and updates).
constexpr RangeRow kRanges[] = {
    // IPv4.
    {"0.0.0.0/8", AddressClass::kUnspecified,
     "\"this network\" 0.0.0.0/8 (RFC 791): Linux connects it to the host itself"},
    {"10.0.0.0/8", AddressClass::kPrivate, "private network 10.0.0.0/8 (RFC 1918)"},
    // Metadata services first: they sit inside the wider ranges below (or in public space),
    // and no address rule may open them (ParseRule refuses kCloudMetadata).
    {"100.100.100.200/32", AddressClass::kCloudMetadata,
     "Alibaba Cloud instance metadata service 100.100.100.200 (serves the host's credentials)"},
    {"168.63.129.16/32", AddressClass::kCloudMetadata,
     "Azure WireServer 168.63.129.16 (VM agent and extension configuration, DNS, health)"},
    {"169.254.170.2/32", AddressClass::kCloudMetadata,
     "AWS ECS task metadata and credentials endpoint 169.254.170.2"},
    {"169.254.170.23/32", AddressClass::kCloudMetadata,
     "AWS EKS Pod Identity agent 169.254.170.23 (serves credentials)"},
    {"169.254.0.23/32", AddressClass::kCloudMetadata,
     "Tencent Cloud instance metadata service 169.254.0.23"},
    {"192.0.0.192/32", AddressClass::kCloudMetadata,
     "Oracle Cloud instance metadata service 192.0.0.192"},
    {"100.64.0.0/10", AddressClass::kSharedCgnat,
     "shared address space 100.64.0.0/10 (RFC 6598: carrier-grade NAT, tailnets)"},
    {"127.0.0.0/8", AddressClass::kLoopback, "loopback 127.0.0.0/8: the host itself"},
    {"169.254.169.254/32", AddressClass::kCloudMetadata,
     "cloud instance metadata service 169.254.169.254 (serves the host's credentials)"},
    {"169.254.0.0/16", AddressClass::kLinkLocal, "link-local 169.254.0.0/16 (RFC 3927)"},
    {"172.16.0.0/12", AddressClass::kPrivate, "private network 172.16.0.0/12 (RFC 1918)"},
    {"192.0.0.0/24", AddressClass::kIetfProtocol,
     "IETF protocol assignments 192.0.0.0/24 (RFC 6890)"},
    {"192.0.2.0/24", AddressClass::kDocumentation, "documentation TEST-NET-1 192.0.2.0/24"},
    {"192.88.99.0/24", AddressClass::kReserved,
     "deprecated 6to4 relay anycast 192.88.99.0/24 (RFC 7526)"},
    {"192.168.0.0/16", AddressClass::kPrivate, "private network 192.168.0.0/16 (RFC 1918)"},
    {"198.18.0.0/15", AddressClass::kBenchmarking, "benchmarking 198.18.0.0/15 (RFC 2544)"},
    {"198.51.100.0/24", AddressClass::kDocumentation, "documentation TEST-NET-2 198.51.100.0/24"},
    {"203.0.113.0/24", AddressClass::kDocumentation, "documentation TEST-NET-3 203.0.113.0/24"},
    {"224.0.0.0/4", AddressClass::kMulticast, "multicast 224.0.0.0/4"},
    {"255.255.255.255/32", AddressClass::kBroadcast, "limited broadcast 255.255.255.255"},
    {"240.0.0.0/4", AddressClass::kReserved, "reserved 240.0.0.0/4"},
    // IPv6.
    {"::/128", AddressClass::kUnspecified, "unspecified address ::"},
    {"::1/128", AddressClass::kLoopback, "loopback ::1: the host itself"},
    {"::ffff:0:0/96", AddressClass::kPublic, "IPv4-mapped address", Embedded::kLast32Bits},
    {"::/96", AddressClass::kReserved, "deprecated IPv4-compatible address ::/96 (RFC 4291)"},
    {"64:ff9b::/96", AddressClass::kPublic, "NAT64 address", Embedded::kLast32Bits},
    {"64:ff9b:1::/48", AddressClass::kPrivate, "local-use NAT64 64:ff9b:1::/48 (RFC 8215)"},
    {"100::/64", AddressClass::kDiscardOnly, "discard-only 100::/64 (RFC 6666)"},
    {"2001:db8::/32", AddressClass::kDocumentation, "documentation 2001:db8::/32"},
    {"2001::/32", AddressClass::kTunnel,
     "Teredo 2001::/32 (RFC 4380): the IPv4 peer it reaches cannot be vetted"},
    {"2002::/16", AddressClass::kPublic, "6to4 address", Embedded::kBits16To48},
    {"3fff::/20", AddressClass::kDocumentation, "documentation 3fff::/20 (RFC 9637)"},
    {"fd00:ec2::254/128", AddressClass::kCloudMetadata,
     "cloud instance metadata service fd00:ec2::254 (serves the host's credentials)"},
    {"fd00:ec2::23/128", AddressClass::kCloudMetadata,
     "AWS EKS Pod Identity agent fd00:ec2::23 (serves credentials)"},
    {"fc00::/7", AddressClass::kUniqueLocal, "unique local fc00::/7 (RFC 4193)"},
    {"fe80::/10", AddressClass::kLinkLocal, "link-local fe80::/10"},
    {"fec0::/10", AddressClass::kPrivate, "deprecated site-local fec0::/10 (RFC 3879)"},
    {"ff00::/8", AddressClass::kMulticast, "multicast ff00::/8"},
};

struct ParsedRow {
  IpAddress network;
  int prefix_length;
  const RangeRow* row;
};

const std::vector<ParsedRow>& Table() {
  static const std::vector<ParsedRow>* table = [] {
    auto* rows = new std::vector<ParsedRow>();
    for (const RangeRow& row : kRanges) {
      absl::string_view text = row.prefix;
      size_t slash = text.find('/');
      std::optional<IpAddress> network = IpAddress::Parse(text.substr(0, slash));
      int length = std::atoi(std::string(text.substr(slash + 1)).c_str());
      if (slash == absl::string_view::npos || !network ||
          length > static_cast<int>(network->size() * 8)) {
        std::abort();  // A typo in kRanges.
      }
      rows->push_back({*network, length, &row});
    }
    return rows;
  }();
  return *table;
}

bool InPrefix(const IpAddress& address, const ParsedRow& row) {
  if (address.family() != row.network.family()) {
    return false;
  }
  int bits = row.prefix_length;
  for (int i = 0; bits > 0; ++i, bits -= 8) {
    uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((address.bytes()[i] & mask) != (row.network.bytes()[i] & mask)) {
      return false;
    }
  }
  return true;
}

IpAddress EmbeddedV4(const IpAddress& address, Embedded where) {
  size_t offset = where == Embedded::kLast32Bits ? 12 : 2;
  const auto& b = address.bytes();
  return IpAddress::V4({b[offset], b[offset + 1], b[offset + 2], b[offset + 3]});
}

}  // namespace

std::optional<IpAddress> IpAddress::Parse(absl::string_view text) {
  // inet_pton reads a C string: an embedded NUL would hide a suffix ("1.2.3.4\0junk").
  if (text.empty() || text.size() > INET6_ADDRSTRLEN || absl::StrContains(text, '\0')) {
    return std::nullopt;
  }
  std::string c_text(text);
  std::array<uint8_t, 16> bytes{};
  if (inet_pton(AF_INET, c_text.c_str(), bytes.data()) == 1) {
    return IpAddress(Family::kV4, bytes);
  }
  if (inet_pton(AF_INET6, c_text.c_str(), bytes.data()) == 1) {
    return IpAddress(Family::kV6, bytes);
  }
  return std::nullopt;
}

IpAddress IpAddress::V4(const std::array<uint8_t, 4>& bytes) {
  std::array<uint8_t, 16> all{};
  std::copy(bytes.begin(), bytes.end(), all.begin());
  return IpAddress(Family::kV4, all);
}

IpAddress IpAddress::V6(const std::array<uint8_t, 16>& bytes) {
  return IpAddress(Family::kV6, bytes);
}

std::string IpAddress::ToString() const {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(is_v4() ? AF_INET : AF_INET6, bytes_.data(), text, sizeof(text));
  return text;
}

std::string IpAddress::ToUriHost() const {
  return is_v4() ? ToString() : absl::StrCat("[", ToString(), "]");
}

absl::string_view AddressClassName(AddressClass c) {
  switch (c) {
    case AddressClass::kPublic:
      return "public";
    case AddressClass::kUnspecified:
      return "unspecified";
    case AddressClass::kLoopback:
      return "loopback";
    case AddressClass::kPrivate:
      return "private";
    case AddressClass::kSharedCgnat:
      return "shared-cgnat";
    case AddressClass::kLinkLocal:
      return "link-local";
    case AddressClass::kCloudMetadata:
      return "cloud-metadata";
    case AddressClass::kIetfProtocol:
      return "ietf-protocol";
    case AddressClass::kDocumentation:
      return "documentation";
    case AddressClass::kBenchmarking:
      return "benchmarking";
    case AddressClass::kMulticast:
      return "multicast";
    case AddressClass::kBroadcast:
      return "broadcast";
    case AddressClass::kReserved:
      return "reserved";
    case AddressClass::kUniqueLocal:
      return "unique-local";
    case AddressClass::kDiscardOnly:
      return "discard-only";
    case AddressClass::kTunnel:
      return "tunnel";
  }
  return "unknown";
}

AddressVerdict ClassifyAddress(const IpAddress& address) {
  for (const ParsedRow& row : Table()) {
    if (!InPrefix(address, row)) {
      continue;
    }
    if (row.row->embedded == Embedded::kNone) {
      return {row.row->address_class, row.row->reason};
    }
    IpAddress v4 = EmbeddedV4(address, row.row->embedded);
    AddressVerdict inner = ClassifyAddress(v4);
    if (inner.address_class != AddressClass::kPublic) {
      inner.reason = absl::StrCat(row.row->reason, " ", address.ToString(), " embeds ",
                                  v4.ToString(), ": ", inner.reason);
    }
    return inner;
  }
  // Everything IANA has not allocated as global unicast is refused by default.
  if (!address.is_v4() && (address.bytes()[0] & 0xe0) != 0x20) {
    return {AddressClass::kReserved, "IPv6 outside global unicast 2000::/3"};
  }
  return {AddressClass::kPublic, ""};
}

std::optional<std::string> RefusalReason(const IpAddress& address) {
  AddressVerdict verdict = ClassifyAddress(address);
  if (verdict.address_class == AddressClass::kPublic) {
    return std::nullopt;
  }
  return std::move(verdict.reason);
}

std::optional<IpAddress> EmbeddedIpv4(const IpAddress& address) {
  for (const ParsedRow& row : Table()) {
    if (row.row->embedded != Embedded::kNone && InPrefix(address, row)) {
      return EmbeddedV4(address, row.row->embedded);
    }
  }
  return std::nullopt;
}

std::optional<std::string> HostAddressReason(const IpAddress& address,
                                             const std::vector<IpAddress>& host_addresses) {
  std::optional<IpAddress> inner = EmbeddedIpv4(address);
  for (const IpAddress& own : host_addresses) {
    if (own == address || (inner && own == *inner)) {
      return absl::StrCat("an address of this host (", own.ToString(),
                          " is on one of its network interfaces)");
    }
  }
  return std::nullopt;
}

std::optional<IpAddress> ParseIpLiteralHost(absl::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    std::optional<IpAddress> inner = IpAddress::Parse(host.substr(1, host.size() - 2));
    if (!inner || inner->is_v4()) {
      return std::nullopt;  // Brackets hold IPv6 only (RFC 3986).
    }
    return inner;
  }
  return IpAddress::Parse(host);
}

}  // namespace abox::net
