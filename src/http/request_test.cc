#include "src/http/request.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::http {
namespace {

using testing::ElementsAre;
using testing::Pair;

TEST(RequestTest, PercentDecodeHandlesEscapesAndPlus) {
  EXPECT_EQ(*PercentDecode("a%20b%2Fc", false), "a b/c");
  EXPECT_EQ(*PercentDecode("a+b", false), "a+b");
  EXPECT_EQ(*PercentDecode("a+b", true), "a b");
  EXPECT_EQ(*PercentDecode("%e2%9C%93", false), "\xe2\x9c\x93");
}

TEST(RequestTest, PercentDecodeRejectsBadEscapesAndNul) {
  for (absl::string_view bad :
       {absl::string_view("%"), absl::string_view("%2"), absl::string_view("%zz"),
        absl::string_view("abc%4"), absl::string_view("%00"), absl::string_view("a\0b", 3)}) {
    absl::StatusOr<std::string> r = PercentDecode(bad, false);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(RequestTest, SplitTargetSeparatesPathAndDecodesQuery) {
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
  ASSERT_TRUE(
      SplitTarget("/v1/sandboxes?label=app%3Dweb&label=tier=db&all&x=a+b#frag", &path, &query)
          .ok());
  EXPECT_EQ(path, "/v1/sandboxes");
  EXPECT_THAT(query, ElementsAre(Pair("label", "app=web"), Pair("label", "tier=db"),
                                 Pair("all", ""), Pair("x", "a b")));
  ASSERT_TRUE(SplitTarget("/plain", &path, &query).ok());
  EXPECT_EQ(path, "/plain");
  EXPECT_TRUE(query.empty());
}

TEST(RequestTest, SplitTargetRejectsNonOriginFormAndBadQuery) {
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
  EXPECT_FALSE(SplitTarget("http://example.com/x", &path, &query).ok());
  EXPECT_FALSE(SplitTarget("*", &path, &query).ok());
  EXPECT_FALSE(SplitTarget("/x?a=%G1", &path, &query).ok());
}

TEST(RequestTest, AccessorsFindHeadersParamsAndQueries) {
  Request r;
  r.headers = {{"Content-Type", "application/json"}, {"X-A", "1"}, {"x-a", "2"}};
  r.params = {{"id", "sb-1"}};
  r.query = {{"label", "a"}, {"label", "b"}};
  EXPECT_EQ(r.Header("content-type"), "application/json");
  EXPECT_EQ(r.Header("X-a"), "1");
  EXPECT_EQ(r.Header("missing"), std::nullopt);
  EXPECT_EQ(r.Param("id"), "sb-1");
  EXPECT_EQ(r.Param("exec"), "");
  EXPECT_EQ(r.Query("label"), "a");
  EXPECT_THAT(r.QueryAll("label"), ElementsAre("a", "b"));
  EXPECT_EQ(r.Query("nope"), std::nullopt);
}

}  // namespace
}  // namespace abox::http
