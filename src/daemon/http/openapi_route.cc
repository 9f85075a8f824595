#include "src/daemon/http/openapi_route.h"

#include <memory>

namespace abox::daemon::http {

absl::Status AddOpenApiRoute(Router& router, std::string yaml) {
  auto bytes = std::make_shared<const std::string>(std::move(yaml));
  return router.Add("GET", kOpenApiPath, [bytes](Request& /*request*/, Responder& responder) {
    responder.Send(200, "application/yaml", *bytes);
  });
}

}  // namespace abox::daemon::http
