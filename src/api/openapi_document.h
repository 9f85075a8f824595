// The API contract, docs/openapi.yaml, compiled into the binary (the build regenerates it when
// the file changes: see openapi.cmake). aboxd serves it at GET /v1/openapi.yaml.
#pragma once

#include "absl/strings/string_view.h"

namespace abox::api {

// The bytes of docs/openapi.yaml as they were at build time. Static storage; never fails.
[[nodiscard]] absl::string_view OpenApiYaml();

}  // namespace abox::api
