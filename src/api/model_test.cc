#include "src/api/model.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::api {
namespace {

using ::testing::HasSubstr;

TEST(ModelApiTest, AProviderRoundTripsWithoutAKey) {
  ModelProvider p{.api = "anthropic",
                  .secret = "ANTHROPIC_API_KEY",
                  .base_url = "https://api.anthropic.com",
                  .configured = true,
                  .key_stored = true,
                  .updated_at = absl::FromUnixSeconds(1'700'000'000)};
  nlohmann::json j = ToJson(p);
  absl::StatusOr<ModelProvider> back = DecodeModelProvider(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
  absl::StatusOr<std::vector<ModelProvider>> list =
      DecodeModelProviderList(nlohmann::json{{"providers", nlohmann::json::array({j})}});
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->size(), 1U);
}

TEST(ModelApiTest, ASetNeedsASecretAndTakesAnOptionalBaseUrl) {
  absl::StatusOr<ModelProviderSet> set =
      DecodeModelProviderSet(ToJson(ModelProviderSet{.secret = "K"}).dump());
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->secret, "K");
  EXPECT_EQ(set->base_url, "");
  set = DecodeModelProviderSet(R"({"secret": "K", "base_url": "http://127.0.0.1:8080"})");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->base_url, "http://127.0.0.1:8080");
  EXPECT_FALSE(DecodeModelProviderSet(R"({"base_url": "https://x"})").ok());
  absl::StatusOr<ModelProviderSet> unknown =
      DecodeModelProviderSet(R"({"secret": "K", "value": "sk-real"})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("value"));
}

TEST(ModelApiTest, UsageRoundTrips) {
  ModelUsage u{.api = "openai",
               .requests = 3,
               .errors = 1,
               .refused = 2,
               .input_tokens = 33,
               .output_tokens = 21,
               .last_at = absl::FromUnixSeconds(1'700'000'000)};
  absl::StatusOr<std::vector<ModelUsage>> back = DecodeModelUsageList(
      nlohmann::json{{"sandbox_id", "abc"}, {"usage", nlohmann::json::array({ToJson(u)})}});
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 1U);
  EXPECT_EQ((*back)[0], u);
}

}  // namespace
}  // namespace abox::api
