// One parsed HTTP request as handlers see it: no Boost types, owned strings.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::http {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

enum class Transport { kUnix, kTcp };

// Who is on the other end. On the unix socket the kernel vouches for pid/uid (SO_PEERCRED at
// connect time); on TCP the bearer token was checked before the handler runs.
struct Peer {
  Transport transport = Transport::kUnix;
  std::optional<pid_t> pid;
  std::optional<uid_t> uid;
};

// A request after routing. Valid only during the handler call: copy what a later response needs.
struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: "/v1/sandboxes?label=app%3Dweb"
  std::string path;    // target before '?', not decoded: "/v1/sandboxes"
  std::vector<std::pair<std::string, std::string>> query;   // decoded, in order, repeats kept
  std::vector<std::pair<std::string, std::string>> params;  // decoded captures of {name}
  HttpHeaders headers;                                      // names as sent
  std::string body;
  Peer peer;

  // The first header called `name` (case-insensitive).
  [[nodiscard]] std::optional<std::string> Header(absl::string_view name) const;
  // The path capture `name` ("" when the route has none; the router always fills its own).
  [[nodiscard]] const std::string& Param(absl::string_view name) const;
  // The first query value for `name`, and all of them.
  [[nodiscard]] std::optional<std::string> Query(absl::string_view name) const;
  [[nodiscard]] std::vector<std::string> QueryAll(absl::string_view name) const;
};

// Decodes %XX escapes (and '+' as space when `plus_is_space`, for query strings).
// kInvalidArgument on a truncated or non-hex escape or a NUL (raw or decoded).
[[nodiscard]] absl::StatusOr<std::string> PercentDecode(absl::string_view s, bool plus_is_space);

// Splits an origin-form target into its raw path and decoded query pairs. kInvalidArgument
// when the target does not start with '/' or the query has a bad escape.
[[nodiscard]] absl::Status SplitTarget(absl::string_view target, std::string* path,
                                       std::vector<std::pair<std::string, std::string>>* query);

}  // namespace abox::http
