// docs/openapi.yaml describes exactly what aboxd serves: every route the daemon registers is in
// the document and every documented operation is served, and the document is sound.
#include "gtest/gtest.h"
#include "src/api/openapi_check.h"
#include "src/api/openapi_document.h"
#include "src/daemon/handlers/services.h"

namespace abox::daemon {
namespace {

// Every route aboxd registers. The handlers only capture the services, so empty ones do.
std::vector<std::pair<std::string, std::string>> DaemonRoutes() {
  Services services;
  http::Router router;
  EXPECT_TRUE(RegisterRoutes(router, services).ok());
  return router.Routes();
}

TEST(OpenApiRoutesTest, TheDocumentMatchesTheRouter) {
  absl::StatusOr<std::set<api::OpenApiOperation>> spec = api::OpenApiOperations(api::OpenApiYaml());
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<std::pair<std::string, std::string>> routes = DaemonRoutes();
  EXPECT_GE(routes.size(), 15u);
  EXPECT_EQ(api::DiffOperations(*spec, routes), "");
}

TEST(OpenApiRoutesTest, AMissingRouteIsReported) {
  absl::StatusOr<std::set<api::OpenApiOperation>> spec = api::OpenApiOperations(api::OpenApiYaml());
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<std::pair<std::string, std::string>> routes = DaemonRoutes();
  routes.emplace_back("POST", "/v1/sandboxes/{id}/undocumented");
  EXPECT_NE(api::DiffOperations(*spec, routes).find("/v1/sandboxes/{id}/undocumented"),
            std::string::npos);
}

}  // namespace
}  // namespace abox::daemon
