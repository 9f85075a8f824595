// Serves the OpenAPI description of the API at GET /v1/openapi.yaml.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "src/daemon/http/router.h"

namespace abox::daemon::http {

inline constexpr char kOpenApiPath[] = "/v1/openapi.yaml";

// Adds GET /v1/openapi.yaml answering `yaml` (the caller reads docs/openapi.yaml or embeds it)
// as application/yaml. Errors as Router::Add.
[[nodiscard]] absl::Status AddOpenApiRoute(Router& router, std::string yaml);

}  // namespace abox::daemon::http
