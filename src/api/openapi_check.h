// Checks the API contract (docs/openapi.yaml) for soundness and against the routes aboxd
// serves. For tests: it links yaml-cpp, which aboxd does not. The document is ours (trusted);
// yaml-cpp's exceptions are caught here, at the boundary.
#pragma once

#include <compare>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::api {

// One operation: an HTTP method on a path pattern.
struct OpenApiOperation {
  std::string method;   // upper case: "GET"
  std::string pattern;  // as under `paths:`, e.g. "/v1/sandboxes/{id}/execs/{exec}"

  [[nodiscard]] std::string ToString() const { return method + " " + pattern; }
  friend auto operator<=>(const OpenApiOperation&, const OpenApiOperation&) = default;
};

// Parses an OpenAPI 3 document and returns the operations under `paths:` (HEAD left out),
// after checking that it is sound:
//  - every `{param}` in a path is declared `in: path` with `required: true`, on the path or on
//    the operation (a `$ref` to #/components/parameters/... is followed), and every declared
//    path parameter occurs in its path;
//  - every operation has `responses`, each with a status code, and each a `description` or a
//    `$ref` that resolves to one;
//  - every local `$ref` anywhere in the document resolves.
// kInvalidArgument naming every problem found, one a line, when the document is not YAML, not
// OpenAPI 3, or not sound.
[[nodiscard]] absl::StatusOr<std::set<OpenApiOperation>> OpenApiOperations(absl::string_view yaml);

// The difference between the document's operations and a router's (method, pattern) routes,
// as Router::Routes() lists them; methods compare case-insensitively and HEAD is ignored on
// both sides. Empty when they agree, else e.g.
//   missing in spec (served, not documented):
//     POST /v1/sandboxes/{id}/pause
//   missing in server (documented, not served):
//     GET /v1/sandboxes/{id}/files
[[nodiscard]] std::string DiffOperations(
    const std::set<OpenApiOperation>& spec,
    const std::vector<std::pair<std::string, std::string>>& routes);

}  // namespace abox::api
