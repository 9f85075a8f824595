#include "src/http/router.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/api/errors.h"
#include "src/base/status_macros.h"

namespace abox::http {
namespace {

// Splits "/a/b" into {"a", "b"}; "/" is no segments. Empty segments ("//", trailing '/') are
// kept so that they fail to match instead of being silently normalised.
std::vector<absl::string_view> SplitPath(absl::string_view path) {
  if (path == "/") {
    return {};
  }
  absl::string_view rest = path.substr(1);
  return absl::StrSplit(rest, '/');
}

bool IsToken(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isupper(c) || c == '-' || c == '_';
  });
}

bool IsCaptureName(absl::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
}

}  // namespace

absl::Status Router::Add(absl::string_view method, absl::string_view pattern, Handler handler,
                         RouteOptions options) {
  if (!IsToken(method)) {
    return absl::InvalidArgumentError(
        absl::StrCat("route method \"", method, "\" must be an upper-case HTTP method"));
  }
  if (!handler) {
    return absl::InvalidArgumentError(
        absl::StrCat("route ", method, " ", pattern, " has no handler"));
  }
  if (pattern.empty() || pattern.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("route pattern \"", pattern, "\" must start with '/'"));
  }
  Route route{std::string(method), std::string(pattern), {}, std::move(handler), options};
  std::set<std::string> names;
  for (absl::string_view segment : SplitPath(pattern)) {
    if (segment.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("route pattern \"", pattern, "\" has an empty segment"));
    }
    bool opens = absl::StartsWith(segment, "{");
    bool closes = absl::EndsWith(segment, "}");
    if (opens || closes) {
      absl::string_view name = segment.substr(1, segment.size() - 2);
      if (!opens || !closes || segment.size() < 3 || !IsCaptureName(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "route pattern \"", pattern, "\": a capture is a whole segment like {id}"));
      }
      if (!names.emplace(name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("route pattern \"", pattern, "\" repeats capture {", name, "}"));
      }
      route.segments.push_back({std::string(name), true});
    } else if (absl::StrContains(segment, "{") || absl::StrContains(segment, "}")) {
      return absl::InvalidArgumentError(
          absl::StrCat("route pattern \"", pattern, "\": a capture is a whole segment like {id}"));
    } else {
      route.segments.push_back({std::string(segment), false});
    }
  }
  for (const Route& existing : routes_) {
    if (existing.method == route.method && existing.pattern == route.pattern) {
      return absl::AlreadyExistsError(
          absl::StrCat("route ", route.method, " ", route.pattern, " is registered twice"));
    }
  }
  routes_.push_back(std::move(route));
  return absl::OkStatus();
}

std::vector<const Router::Route*> Router::BestMatches(
    const std::vector<absl::string_view>& segments) const {
  std::vector<const Route*> best;
  std::vector<bool> best_shape;  // capture flags of the best pattern; lexicographically least
  for (const Route& route : routes_) {
    if (route.segments.size() != segments.size()) {
      continue;
    }
    bool matches = true;
    std::vector<bool> shape;
    for (size_t i = 0; i < segments.size() && matches; ++i) {
      const Segment& s = route.segments[i];
      matches = s.capture ? !segments[i].empty() : s.text == segments[i];
      shape.push_back(s.capture);
    }
    if (!matches) {
      continue;
    }
    if (best.empty() || shape < best_shape) {
      best = {&route};
      best_shape = std::move(shape);
    } else if (shape == best_shape) {
      best.push_back(&route);
    }
  }
  return best;
}

absl::StatusOr<Router::Match> Router::Find(absl::string_view method, absl::string_view path) const {
  std::vector<absl::string_view> segments = SplitPath(path);
  std::vector<const Route*> candidates = BestMatches(segments);
  if (candidates.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no API endpoint at ", path, "; GET /v1/openapi.yaml lists the endpoints"));
  }
  const Route* route = nullptr;
  for (const Route* candidate : candidates) {
    if (candidate->method == method) {
      route = candidate;
    }
  }
  if (route == nullptr && method == "HEAD") {  // HEAD is GET without the body (RFC 9110 9.3.2)
    for (const Route* candidate : candidates) {
      if (candidate->method == "GET") {
        route = candidate;
      }
    }
  }
  if (route == nullptr) {
    return api::WithErrorCode(
        absl::UnimplementedError(absl::StrCat(path, " does not support ", method, "; use ",
                                              absl::StrJoin(AllowedMethods(path), ", "))),
        api::kMethodNotAllowed);
  }
  Match match{&route->handler, route->options, route->pattern, {}};
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = route->segments[i];
    if (!s.capture) {
      continue;
    }
    absl::StatusOr<std::string> value = PercentDecode(segments[i], /*plus_is_space=*/false);
    if (!value.ok()) {
      return api::WithField(value.status(), s.text);
    }
    bool control = std::any_of(value->begin(), value->end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (*value == "." || *value == ".." || absl::StrContains(*value, "/") || control) {
      return api::FieldError(s.text, absl::StrCat("path parameter {", s.text,
                                                  "} must not be \".\" or \"..\", nor contain "
                                                  "'/' or control characters"));
    }
    match.params.emplace_back(s.text, *std::move(value));
  }
  return match;
}

std::vector<std::string> Router::AllowedMethods(absl::string_view path) const {
  std::set<std::string> methods;
  for (const Route* route : BestMatches(SplitPath(path))) {
    methods.insert(route->method);
  }
  return {methods.begin(), methods.end()};
}

std::vector<std::pair<std::string, std::string>> Router::Routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(routes_.size());
  for (const Route& route : routes_) {
    out.emplace_back(route.method, route.pattern);
  }
  return out;
}

}  // namespace abox::http
