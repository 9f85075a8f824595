// Swaps secret placeholders for real values in an HTTP/1.1 request head going to the host the
// secret is bound to, and refuses a head that carries a placeholder anywhere else.
//
// The guest only ever holds placeholders. The proxy (after terminating TLS for a bound host and
// checking that SNI, Host and the resolved address agree: the caller's job) hands each request
// head here with that verified destination, and sends on the head this returns:
//   - a placeholder in a header value is replaced by the real value when the secret is bound to
//     the destination and the header is one it may go in (default: any);
//   - in `Authorization: Basic <base64>` the credentials are decoded, replaced, re-encoded;
//   - in the URL query (raw or percent-encoded, even partially) only if the binding allows it;
//     the value is percent-encoded there;
//   - a placeholder of a secret NOT bound to the destination, anywhere in the head and in any
//     encoding the leak detector knows (raw, percent, JSON, base64, Basic), is a leak: the
//     request is refused and the refusal names the secret (never its value);
//   - a placeholder of a bound secret where the binding does not allow it (the path, the query
//     without allow_query, a header not listed) is refused too, with what to change.
// Bodies are not touched (Content-Length stays right); the proxy watches them with a
// LeakDetector (LeakNeedlesFor).
//
// Trust boundary: the head is the guest's (parsed and bounded by HttpRequestHeadParser); the
// table is the user's configuration. Real values never appear in a message or a log line made
// from these results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/http_request_head.h"
#include "src/net/leak_detector.h"
#include "src/net/policy.h"

namespace abox::net {

// The rewritten head may grow past the parser's 16 KiB by the values swapped in; not past this.
inline constexpr size_t kMaxSwappedHeadSize = size_t{64} * 1024;
inline constexpr size_t kMinPlaceholderSize = kMinNeedleSize;
inline constexpr size_t kMaxPlaceholderSize = 256;
inline constexpr size_t kMaxSecretValueSize = 8192;

struct SecretBinding {
  std::string name;         // "GITHUB_TOKEN": what refusals and logs name
  std::string placeholder;  // what the guest holds: [A-Za-z0-9._-], 8..256 bytes
  std::string value;        // the real value: no control bytes (it goes into a header line)
  // Where it may go, in egress-rule form: "api.github.com", "*.example.com" (below, not the
  // apex), "host:8443" (ports replace the default 443). No presets or addresses.
  std::vector<std::string> hosts;
  std::vector<std::string> headers;  // header names it may go in; empty: any header
  bool allow_query = false;          // may also go in the URL query
};

// The validated bindings of one sandbox. Immutable; thread-safe.
class SecretTable final {
 public:
  struct Entry {
    SecretBinding binding;
    EgressPolicy hosts;  // an allowlist of the binding's host rules
  };

  // InvalidArgument naming the binding (never a value) when a name, placeholder, value, host or
  // header is malformed, two names or placeholders are equal, or one placeholder contains
  // another (substitution would be ambiguous). At most kMaxNeedles bindings.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const SecretTable>> Create(
      std::vector<SecretBinding> bindings);

  const std::vector<Entry>& entries() const { return entries_; }
  // Whether `entry` may be sent to host:port (both as verified by the proxy).
  static bool BoundTo(const Entry& entry, absl::string_view host, uint16_t port);
  // The placeholders that must not go to host:port: for a LeakDetector on bodies sent there.
  std::vector<Needle> LeakNeedlesFor(absl::string_view host, uint16_t port) const;

 private:
  SecretTable() = default;
  std::vector<Entry> entries_;
};

struct SecretRefusal {
  enum class Kind : uint8_t {
    kLeak,        // a placeholder to a host its secret is not bound to: an exfiltration attempt
    kNotAllowed,  // to its own host, but in a place its binding does not allow
  };
  Kind kind = Kind::kLeak;
  std::string secret;   // the secret's name
  std::string where;    // "the request line", "header 'X-Api-Key'", ...
  std::string message;  // for the 403 and the log: names the secret and the host, no value
};

struct SwapOutcome {
  // When no refusal: the head to send upstream (request line, headers, blank line), rebuilt from
  // the parsed head (one space after each ':'), with the values swapped in.
  std::string head;
  // The names of the secrets swapped in (each once, in table order).
  std::vector<std::string> swapped;
  std::optional<SecretRefusal> refusal;
};

// Rewrites `head` (parsed by HttpRequestHeadParser) for `host`:`port`, the destination the proxy
// verified. Errors (not refusals): an empty host, a result larger than kMaxSwappedHeadSize.
[[nodiscard]] absl::StatusOr<SwapOutcome> SwapSecrets(const SecretTable& table,
                                                      const HttpRequestHead& head,
                                                      absl::string_view host, uint16_t port);

}  // namespace abox::net
