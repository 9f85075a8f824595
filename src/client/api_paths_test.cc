#include "src/client/api_paths.h"

#include "gtest/gtest.h"

namespace abox::client {
namespace {

TEST(ApiPathsTest, EscapesEverythingButUnreservedCharacters) {
  EXPECT_EQ(UrlEscape("abc-XYZ_0.9~"), "abc-XYZ_0.9~");
  EXPECT_EQ(UrlEscape("a=b&c d/é?#%"), "a%3Db%26c%20d%2F%C3%A9%3F%23%25");
}

TEST(ApiPathsTest, BuildsTargets) {
  EXPECT_EQ(WithQuery("/v1/sandboxes", {}), "/v1/sandboxes");
  EXPECT_EQ(
      WithQuery("/v1/sandboxes", {{"label", "app=web"}, {"state", "ready"}, {"state", "creating"}}),
      "/v1/sandboxes?label=app%3Dweb&state=ready&state=creating");
  EXPECT_EQ(SandboxPath("web/1", "/execs"), "/v1/sandboxes/web%2F1/execs");
  EXPECT_EQ(ExecPath("3fa", "e1", "/output"), "/v1/sandboxes/3fa/execs/e1/output");
}

}  // namespace
}  // namespace abox::client
