// What the model broker forwards, and where: the guest-facing routes (which method and path of
// which provider API may reach the provider), the upstream base URLs aboxd is configured with,
// the guest's per-sandbox token, the head the provider is sent (the guest's credentials and
// hop-by-hop headers out, the real key in), and the provider-shaped error bodies the agent CLIs
// print.
//
// Trust boundary: request heads come from the guest (hostile). A route is forwarded only when
// its path matches the table exactly: no percent-encoding, no dot segments, no empty segments,
// origin-form only, so the path the provider routes on is the one checked here. Base URLs come
// from the host's configuration (trusted, but checked: a typo must not send the key to a plain
// HTTP host). The real key appears in no message this file makes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/net/http_request_head.h"

namespace abox::net {

enum class ModelApi : uint8_t { kAnthropic, kOpenAi };

// "anthropic" / "openai": the guest-facing path prefix without its '/'.
absl::string_view ModelApiPrefix(ModelApi api);
// "Anthropic" / "OpenAI": for messages.
absl::string_view ModelApiDisplayName(ModelApi api);

// Where one API's requests go.
struct ModelUpstream {
  ModelApi api = ModelApi::kAnthropic;
  bool tls = true;
  std::string host;  // a normalised name, or an IP literal (no brackets)
  uint16_t port = 443;
  std::string path_prefix;  // "" or "/compat" (no trailing '/')

  // The Host header value: the host (IPv6 in brackets), with ":port" unless the default.
  std::string HostHeader() const;
  // "host:port" for messages.
  std::string Authority() const;
};

inline constexpr char kDefaultAnthropicBaseUrl[] = "https://api.anthropic.com";
inline constexpr char kDefaultOpenAiBaseUrl[] = "https://api.openai.com";

// `https://host[:port][/prefix]`, or `http://...` only for `localhost` and loopback literals
// (127.0.0.0/8, [::1]): local model servers and tests. No userinfo, query or fragment; a
// trailing '/' is dropped. InvalidArgument saying what is wrong and what is accepted.
[[nodiscard]] absl::StatusOr<ModelUpstream> ParseModelBaseUrl(ModelApi api, absl::string_view url);
// ParseModelBaseUrl of the default base URL.
ModelUpstream DefaultModelUpstream(ModelApi api);

// What the broker does with one request.
enum class ModelRouteKind : uint8_t {
  kForward,           // to the provider
  kProbe,             // a health probe the broker answers itself (200)
  kNotFound,          // 404: no such route
  kMethodNotAllowed,  // 405: a known path with another method
};

// What a forwarded response may carry usage in.
enum class ModelUsageKind : uint8_t { kNone, kAnthropicMessages, kOpenAiResponses };

struct ModelRoute {
  ModelRouteKind kind = ModelRouteKind::kNotFound;
  // The API the path's prefix names, when it names one (also for refusals, to shape the error
  // body the way that API's client prints it).
  std::optional<ModelApi> api;
  std::string path;             // the guest's path without the query (for records and messages)
  std::string upstream_target;  // kForward: the path after the API's prefix, query included
  ModelUsageKind usage = ModelUsageKind::kNone;
  std::string allow;  // kMethodNotAllowed: the Allow header's value
};

// The route of `method` `target` (a request line's, from the guest).
ModelRoute ClassifyModelRoute(absl::string_view method, absl::string_view target);

// Whether `head` carries `token` as the guest's credential: `Authorization: Bearer <token>` or
// `x-api-key: <token>`. Every such header must carry it (two that disagree are refused), and
// at least one must be there. Compared in constant time.
bool HasModelToken(const HttpRequestHead& head, absl::string_view token);

// The head the provider gets for `head` (forwarded on `route`): request line with the
// upstream's path prefix, Host rewritten in place, the guest's credentials (Authorization,
// x-api-key, Proxy-Authorization, Cookie) and hop-by-hop headers (Connection, those it names,
// Keep-Alive, Proxy-Connection, TE, Upgrade) removed, the real key added (x-api-key for
// Anthropic, Authorization: Bearer for OpenAI); everything else unchanged and in order.
std::string RewriteModelHead(const HttpRequestHead& head, const ModelRoute& route,
                             const ModelUpstream& upstream, absl::string_view key);

// Whether `key` can be written into a header line (visible ASCII, 8..8192 bytes). The message
// never quotes the key.
[[nodiscard]] absl::Status CheckModelKey(ModelApi api, absl::string_view key);

// A response the broker answers itself: status line, JSON error body shaped like `api`'s (an
// OpenAI-style body when no API is known), `Connection: close` unless `keep_alive`.
struct ModelReply {
  int status = 500;
  std::string message;              // after "abox model broker: "
  std::vector<HttpHeader> headers;  // extra (retry-after, allow)
};
std::string BuildModelErrorReply(std::optional<ModelApi> api, const ModelReply& reply,
                                 bool head_request);
// The 200 answer to a health probe: `{"ok":true}` (no body for HEAD).
std::string BuildModelProbeReply(bool head_request);

}  // namespace abox::net
