#include "src/secrets/placeholder.h"

#include <regex>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::secrets {
namespace {

TEST(PlaceholderTest, IsPrefixNameAnd32Hex) {
  auto placeholder = NewPlaceholder("GITHUB_TOKEN");
  ASSERT_TRUE(placeholder.ok()) << placeholder.status();
  EXPECT_TRUE(std::regex_match(*placeholder, std::regex("ABOX_SECRET_GITHUB_TOKEN_[0-9a-f]{32}")))
      << *placeholder;
  EXPECT_TRUE(IsPlaceholder(*placeholder));
}

TEST(PlaceholderTest, EveryCallIsUnique) {
  std::set<std::string> seen;
  for (int i = 0; i < 2000; ++i) {
    auto placeholder = NewPlaceholder("NPM_TOKEN");
    ASSERT_TRUE(placeholder.ok());
    EXPECT_TRUE(seen.insert(*placeholder).second) << "repeated: " << *placeholder;
  }
}

TEST(PlaceholderTest, RefusesAnInvalidName) {
  auto placeholder = NewPlaceholder("not-a-name");
  EXPECT_EQ(placeholder.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlaceholderTest, RecognisesOnlyWellFormedPlaceholders) {
  std::string hex(32, 'a');
  EXPECT_TRUE(IsPlaceholder("ABOX_SECRET_A_" + hex));
  EXPECT_TRUE(IsPlaceholder("ABOX_SECRET_MY__NAME_" + hex));
  EXPECT_FALSE(IsPlaceholder("ABOX_SECRET__" + hex));             // no name
  EXPECT_FALSE(IsPlaceholder("ABOX_SECRET_A" + hex));             // no separator
  EXPECT_FALSE(IsPlaceholder("ABOX_SECRET_A_" + hex + "0"));      // 33 hex: name "A_a..." invalid
  EXPECT_FALSE(IsPlaceholder("ABOX_SECRET_A_" + hex.substr(1)));  // 31 hex
  EXPECT_FALSE(IsPlaceholder("ABOX_SECRET_A_" + std::string(32, 'A')));  // upper-case hex
  EXPECT_FALSE(IsPlaceholder("SANDBOX_SECRET_A_" + hex));
  EXPECT_FALSE(IsPlaceholder("ABOX_SECRET_a_" + hex));
}

}  // namespace
}  // namespace abox::secrets
