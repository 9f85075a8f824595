#include "src/http/router.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"

namespace abox::http {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;
using testing::Pair;

Handler Noop() {
  return [](Request&, Responder&) {};
}

Router MakeRouter() {
  Router r;
  EXPECT_TRUE(r.Add("GET", "/v1/sandboxes", Noop()).ok());
  EXPECT_TRUE(r.Add("POST", "/v1/sandboxes", Noop(), {.blocking = true}).ok());
  EXPECT_TRUE(r.Add("GET", "/v1/sandboxes/{id}", Noop()).ok());
  EXPECT_TRUE(r.Add("DELETE", "/v1/sandboxes/{id}", Noop()).ok());
  EXPECT_TRUE(r.Add("GET", "/v1/sandboxes/{id}/execs/{exec}", Noop()).ok());
  EXPECT_TRUE(r.Add("POST", "/v1/sandboxes/search", Noop()).ok());
  EXPECT_TRUE(r.Add("GET", "/", Noop()).ok());
  return r;
}

TEST(RouterTest, MatchesLiteralAndCapturedSegments) {
  Router r = MakeRouter();
  absl::StatusOr<Router::Match> m = r.Find("GET", "/v1/sandboxes/sb-1/execs/e%202");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->pattern, "/v1/sandboxes/{id}/execs/{exec}");
  EXPECT_THAT(m->params, ElementsAre(Pair("id", "sb-1"), Pair("exec", "e 2")));
  EXPECT_NE(m->handler, nullptr);
  EXPECT_FALSE(m->options.blocking);

  absl::StatusOr<Router::Match> post = r.Find("POST", "/v1/sandboxes");
  ASSERT_TRUE(post.ok());
  EXPECT_TRUE(post->options.blocking);
  EXPECT_TRUE(r.Find("GET", "/").ok());
  absl::StatusOr<Router::Match> head = r.Find("HEAD", "/v1/sandboxes/x");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->pattern, "/v1/sandboxes/{id}");
  EXPECT_FALSE(r.Find("HEAD", "/v1/sandboxes/search").ok());  // no GET there
}

TEST(RouterTest, LiteralBeatsCapture) {
  Router r = MakeRouter();
  absl::StatusOr<Router::Match> m = r.Find("POST", "/v1/sandboxes/search");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->pattern, "/v1/sandboxes/search");
  EXPECT_TRUE(m->params.empty());
  // The literal owns the path: other methods there are 405, not the {id} route.
  absl::StatusOr<Router::Match> get = r.Find("GET", "/v1/sandboxes/search");
  EXPECT_EQ(api::ErrorKindOf(get.status()).http_status, 405);
}

TEST(RouterTest, UnknownPathIsNotFound) {
  Router r = MakeRouter();
  for (absl::string_view path : {"/v2/sandboxes", "/v1/sandboxes/", "/v1//sandboxes",
                                 "/v1/sandboxes/a/b", "/v1/sandboxes/x/execs/"}) {
    absl::StatusOr<Router::Match> m = r.Find("GET", path);
    ASSERT_FALSE(m.ok()) << path;
    EXPECT_EQ(api::ErrorKindOf(m.status()).code, "not_found") << path;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(std::string(path)));
  }
}

TEST(RouterTest, WrongMethodIsMethodNotAllowedListingTheAllowedOnes) {
  Router r = MakeRouter();
  absl::StatusOr<Router::Match> m = r.Find("PUT", "/v1/sandboxes/sb-1");
  ASSERT_FALSE(m.ok());
  api::ErrorKind kind = api::ErrorKindOf(m.status());
  EXPECT_EQ(kind.http_status, 405);
  EXPECT_EQ(kind.code, api::kMethodNotAllowed);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("use DELETE, GET"));
  EXPECT_THAT(r.AllowedMethods("/v1/sandboxes/sb-1"), ElementsAre("DELETE", "GET"));
}

TEST(RouterTest, RejectsDangerousOrBadlyEscapedCaptures) {
  Router r = MakeRouter();
  for (const std::string& path :
       std::vector<std::string>{"/v1/sandboxes/..", "/v1/sandboxes/.", "/v1/sandboxes/a%2Fb",
                                "/v1/sandboxes/%2e%2e", "/v1/sandboxes/%zz", "/v1/sandboxes/a%00",
                                "/v1/sandboxes/a%0Ab", std::string("/v1/sandboxes/a\0b", 17)}) {
    absl::StatusOr<Router::Match> m = r.Find("GET", path);
    ASSERT_FALSE(m.ok()) << path;
    EXPECT_EQ(api::ErrorKindOf(m.status()).http_status, 400) << path;
    EXPECT_EQ(api::FieldOf(m.status()), "id") << path;
  }
}

TEST(RouterTest, AddRejectsMalformedRoutes) {
  Router r;
  EXPECT_EQ(r.Add("GET", "v1/x", Noop()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add("GET", "/v1//x", Noop()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add("GET", "/v1/x/", Noop()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add("GET", "/v1/{id", Noop()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add("GET", "/v1/x{id}", Noop()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add("GET", "/v1/{}", Noop()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add("GET", "/v1/{a}/{a}", Noop()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add("get", "/v1/x", Noop()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add("GET", "/v1/x", nullptr).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.Add("GET", "/v1/x", Noop()).ok());
  EXPECT_EQ(r.Add("GET", "/v1/x", Noop()).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(r.Add("POST", "/v1/x", Noop()).ok());
}

TEST(RouterTest, RoutesListsEveryRegistration) {
  Router r = MakeRouter();
  std::vector<std::pair<std::string, std::string>> routes = r.Routes();
  ASSERT_EQ(routes.size(), 7u);
  EXPECT_EQ(routes[0], (std::pair<std::string, std::string>{"GET", "/v1/sandboxes"}));
  EXPECT_EQ(routes[4],
            (std::pair<std::string, std::string>{"GET", "/v1/sandboxes/{id}/execs/{exec}"}));
}

}  // namespace
}  // namespace abox::http
