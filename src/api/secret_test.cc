#include "src/api/secret.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::api {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(SecretApiTest, ASecretRoundTripsWithoutAValue) {
  Secret s{.name = "GH_TOKEN",
           .spec = {{"name", "GH_TOKEN"}, {"hosts", {"api.github.com"}}},
           .source = "stored",
           .stored_in = "keyring",
           .created_at = absl::FromUnixSeconds(1'700'000'000),
           .updated_at = absl::FromUnixSeconds(1'700'000'100)};
  nlohmann::json j = ToJson(s);
  EXPECT_FALSE(j.contains("value"));
  absl::StatusOr<Secret> back = DecodeSecret(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  absl::StatusOr<std::vector<Secret>> list =
      DecodeSecretList(nlohmann::json{{"secrets", nlohmann::json::array({j, j})}});
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->size(), 2u);
}

TEST(SecretApiTest, ASetCarriesTheSpecAndAnOptionalValue) {
  SecretSet set{.spec = {{"name", "N"}}, .value = "v4lue"};
  absl::StatusOr<SecretSet> back = DecodeSecretSet(ToJson(set).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->spec, set.spec);
  EXPECT_EQ(back->value, "v4lue");
  back = DecodeSecretSet(R"({"spec": {"name": "N"}})");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->value.has_value());
}

TEST(SecretApiTest, BadSetsAreRefusedWithoutEchoingTheValue) {
  const std::string big(kMaxSecretValueBytes + 1, 'S');
  absl::StatusOr<SecretSet> too_big =
      DecodeSecretSet(nlohmann::json{{"spec", {{"name", "N"}}}, {"value", big}}.dump());
  ASSERT_FALSE(too_big.ok());
  EXPECT_THAT(too_big.status().message(), HasSubstr("is longer than 8192 bytes"));
  EXPECT_THAT(too_big.status().message(), Not(HasSubstr("SSSS")));

  EXPECT_THAT(DecodeSecretSet(R"({"value": "hunter22"})").status().message(),
              HasSubstr("spec must be an object"));
  EXPECT_THAT(DecodeSecretSet(R"({"spec": "GH", "value": "hunter22"})").status().message(),
              Not(HasSubstr("hunter22")));
  EXPECT_THAT(DecodeSecretSet(R"({"spec": {}, "valeu": "hunter22"})").status().message(),
              HasSubstr("valeu"));
  EXPECT_THAT(DecodeSecretSet(R"({"spec": {}, "value": 7})").status().message(),
              HasSubstr("must be a string"));
}

}  // namespace
}  // namespace abox::api
