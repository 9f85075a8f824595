// Host names as the egress proxy, the policy and the DNS resolver compare them.
//
// Every name that decides a connection (TLS SNI, HTTP Host, CONNECT target, DNS QNAME, a policy
// rule) goes through NormalizeHostName first, so "API.GitHub.com." and "api.github.com" are one
// name everywhere and nothing else reaches the host resolver.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::net {

// Longest host name in text form (RFC 1035: 255 octets on the wire = 253 characters).
inline constexpr size_t kMaxHostNameLength = 253;
inline constexpr size_t kMaxLabelLength = 63;

// Returns `name` lowercased with one trailing dot stripped, or InvalidArgument saying why it is
// not a host name. Accepted: LDH labels (letters, digits, '-', not at either end of a label),
// 1..63 characters each, at most 253 in all. The last label must start with a letter: no
// top-level domain starts with a digit, and this keeps IPv4 literals and the inet_aton
// shorthands getaddrinfo would still resolve ("127.1", "0x7f000001") out of the name space.
// Non-ASCII is refused (IDNA is not supported: write the xn-- form).
[[nodiscard]] absl::StatusOr<std::string> NormalizeHostName(absl::string_view name);

// True when `name` is exactly `suffix` or ends with "." + suffix (both already normalised).
bool IsSubdomainOrSelf(absl::string_view name, absl::string_view suffix);

// `text` with bytes outside printable ASCII written as \xNN, cut at `max` bytes: for error
// messages and logs that quote hostile input.
std::string QuoteForLog(absl::string_view text, size_t max = 80);

}  // namespace abox::net
