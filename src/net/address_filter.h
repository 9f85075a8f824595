// Which IP addresses the egress proxy may connect to on the guest's behalf.
//
// The proxy resolves allowed names on the host and then refuses any address that would reach
// the host itself, its networks or infrastructure (RFC 1918, loopback, link-local, the cloud
// metadata service, CGNAT/tailnets, ...). This is what stops "evil.example resolves to
// 127.0.0.1" (DNS rebinding) and IPv6 forms that embed such an IPv4 address. The table in
// address_filter.cc is the policy: one row per range, each with its reason.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace abox::net {

// An IPv4 or IPv6 address (no zone id: link-local destinations are refused anyway).
class IpAddress final {
 public:
  enum class Family : uint8_t { kV4, kV6 };

  // Parses a literal with inet_pton: dotted-quad IPv4 (no shorthands, no leading zeros) or
  // IPv6 text without brackets or zone. Anything else, including embedded NULs, is nullopt.
  static std::optional<IpAddress> Parse(absl::string_view text);
  static IpAddress V4(const std::array<uint8_t, 4>& bytes);
  static IpAddress V6(const std::array<uint8_t, 16>& bytes);

  Family family() const { return family_; }
  bool is_v4() const { return family_ == Family::kV4; }
  // Network-order bytes; an IPv4 address uses the first 4.
  const std::array<uint8_t, 16>& bytes() const { return bytes_; }
  size_t size() const { return is_v4() ? 4 : 16; }
  // Canonical text (inet_ntop): "10.0.0.1", "2001:db8::1".
  std::string ToString() const;
  // ToString() with brackets around IPv6, for "host:port" forms.
  std::string ToUriHost() const;

  friend bool operator==(const IpAddress& a, const IpAddress& b) {
    return a.family_ == b.family_ && a.bytes_ == b.bytes_;
  }

 private:
  IpAddress(Family family, const std::array<uint8_t, 16>& bytes) : family_(family), bytes_(bytes) {}

  Family family_;
  std::array<uint8_t, 16> bytes_;
};

enum class AddressClass : uint8_t {
  kPublic,         // globally routable: the proxy may connect
  kUnspecified,    // 0.0.0.0/8, ::
  kLoopback,       // 127/8, ::1
  kPrivate,        // RFC 1918, local-use NAT64, site-local
  kSharedCgnat,    // 100.64/10: carrier-grade NAT, also Tailscale-style tailnets
  kLinkLocal,      // 169.254/16, fe80::/10
  kCloudMetadata,  // 169.254.169.254, fd00:ec2::254, 168.63.129.16, 100.100.100.200, ...
  kIetfProtocol,   // 192.0.0/24
  kDocumentation,  // TEST-NETs, 2001:db8::/32, 3fff::/20
  kBenchmarking,   // 198.18/15
  kMulticast,      // 224/4, ff00::/8
  kBroadcast,      // 255.255.255.255
  kReserved,       // 240/4, deprecated and non-global-unicast IPv6
  kUniqueLocal,    // fc00::/7
  kDiscardOnly,    // 100::/64
  kTunnel,         // Teredo: the IPv4 peer is obfuscated and cannot be vetted
};

// Short stable name ("loopback", "cloud-metadata") for logs and JSON.
absl::string_view AddressClassName(AddressClass c);

struct AddressVerdict {
  AddressClass address_class = AddressClass::kPublic;
  // Why the address is refused ("loopback 127.0.0.0/8"); empty when kPublic.
  std::string reason;
};

// Classifies `address`. IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16)
// addresses are judged by the IPv4 address they embed. IPv6 outside 2000::/3 that no row names
// is refused as not global unicast.
AddressVerdict ClassifyAddress(const IpAddress& address);

// Why the proxy must not connect to `address`, or nullopt when it may.
std::optional<std::string> RefusalReason(const IpAddress& address);

// The IPv4 address an IPv4-mapped, NAT64 or 6to4 IPv6 address embeds; nullopt otherwise.
std::optional<IpAddress> EmbeddedIpv4(const IpAddress& address);

// Why `address` must be refused as one of the host's own (`host_addresses`, its interface
// addresses at decision time; compared also by the IPv4 an IPv6 form embeds), or nullopt. A
// public address on the host's NIC reaches the host's own services just as loopback does.
std::optional<std::string> HostAddressReason(const IpAddress& address,
                                             const std::vector<IpAddress>& host_addresses);

// Host-name text that is an IP literal: "1.2.3.4", "2001:db8::1" or "[2001:db8::1]".
std::optional<IpAddress> ParseIpLiteralHost(absl::string_view host);
inline bool IsIpLiteralHost(absl::string_view host) { return ParseIpLiteralHost(host).has_value(); }

}  // namespace abox::net
