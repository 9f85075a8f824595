// Maps method + path to a handler. Patterns are literal segments and `{name}` captures of one
// whole segment: "/v1/sandboxes/{id}/execs/{exec}". A literal beats a capture at the same
// position, so "/v1/sandboxes/search" and "/v1/sandboxes/{id}" can coexist.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/http/request.h"
#include "src/http/responder.h"

namespace abox::http {

// Handlers answer through the Responder, now or later (keep a copy). The Request is valid only
// during the call.
using Handler = std::function<void(Request&, Responder&)>;

struct RouteOptions {
  // false: the handler runs on the I/O thread and must return within microseconds (parse,
  // look up, queue work). true: it runs on the server's worker pool and may block for a
  // while (SQLite, booting a VM); it must still give up when the Responder is cancelled.
  bool blocking = false;
};

// Build the table before Server::Create; afterwards it is read-only and safe to share.
class Router final {
 public:
  struct Match {
    const Handler* handler = nullptr;
    RouteOptions options;
    std::string pattern;
    std::vector<std::pair<std::string, std::string>> params;  // decoded
  };

  Router() = default;
  Router(Router&&) = default;
  Router& operator=(Router&&) = default;
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Registers a route. kInvalidArgument for a malformed pattern (must start with '/', no empty
  // segments, captures are whole segments with unique names) or a method that is not an HTTP
  // token; kAlreadyExists for a repeated method + pattern.
  [[nodiscard]] absl::Status Add(absl::string_view method, absl::string_view pattern,
                                 Handler handler, RouteOptions options = {});

  // The route for `method` and the raw (undecoded) `path` (HEAD falls back to the GET route;
  // the server then sends no body). Errors carry the api::errors code:
  // 404 "not_found" when no pattern matches, 405 "method_not_allowed" naming the allowed
  // methods when only the method is wrong, 400 for a capture that is badly escaped, "." or
  // "..", or contains '/' or control characters.
  [[nodiscard]] absl::StatusOr<Match> Find(absl::string_view method, absl::string_view path) const;

  // Methods that some route accepts for `path` (sorted), for the Allow header of a 405.
  [[nodiscard]] std::vector<std::string> AllowedMethods(absl::string_view path) const;

  // Every (method, pattern), in registration order: the OpenAPI consistency test walks these.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> Routes() const;

 private:
  struct Segment {
    std::string text;  // literal text, or the capture name
    bool capture = false;
  };
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<Segment> segments;
    Handler handler;
    RouteOptions options;
  };

  // Routes whose pattern matches `segments`, all sharing the most specific pattern.
  [[nodiscard]] std::vector<const Route*> BestMatches(
      const std::vector<absl::string_view>& segments) const;

  std::vector<Route> routes_;
};

}  // namespace abox::http
