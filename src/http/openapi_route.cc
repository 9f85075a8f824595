#include "src/http/openapi_route.h"

#include <memory>

namespace abox::http {

absl::Status AddOpenApiRoute(Router& router, std::string yaml) {
  auto bytes = std::make_shared<const std::string>(std::move(yaml));
  return router.Add("GET", kOpenApiPath, [bytes](Request& /*request*/, Responder& responder) {
    responder.Send(200, "application/yaml", *bytes);
  });
}

}  // namespace abox::http
