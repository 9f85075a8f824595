// Request targets of the aboxd API (docs/openapi.yaml), with every user-supplied piece escaped.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace abox::client {

using QueryParams = std::vector<std::pair<std::string, std::string>>;

// Percent-encodes every byte but RFC 3986's unreserved characters (A-Z a-z 0-9 - . _ ~), so the
// result is safe as a path segment and as a query key or value.
[[nodiscard]] std::string UrlEscape(absl::string_view text);

// `path` followed by "?k=v&k=v" (escaped, in order, repeats kept); just `path` without params.
[[nodiscard]] std::string WithQuery(absl::string_view path, const QueryParams& params);

// "/v1/sandboxes/<id><suffix>", e.g. SandboxPath("web", "/execs").
[[nodiscard]] std::string SandboxPath(absl::string_view sandbox, absl::string_view suffix = "");

// "/v1/sandboxes/<id>/execs/<exec><suffix>", e.g. ExecPath(s, e, "/output").
[[nodiscard]] std::string ExecPath(absl::string_view sandbox, absl::string_view exec,
                                   absl::string_view suffix = "");

}  // namespace abox::client
