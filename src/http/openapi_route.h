// Serves the OpenAPI description of the API at GET /v1/openapi.yaml.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "src/http/router.h"

namespace abox::http {

inline constexpr char kOpenApiPath[] = "/v1/openapi.yaml";

// Adds GET /v1/openapi.yaml answering `yaml` (the caller reads docs/openapi.yaml or embeds it)
// as application/yaml. Errors as Router::Add.
[[nodiscard]] absl::Status AddOpenApiRoute(Router& router, std::string yaml);

}  // namespace abox::http
