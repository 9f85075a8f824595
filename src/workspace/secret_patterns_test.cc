#include "src/workspace/secret_patterns.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::workspace {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

ExcludeRules Defaults() {
  absl::StatusOr<ExcludeRules> rules = ExcludeRules::Create({}, {});
  EXPECT_TRUE(rules.ok()) << rules.status();
  return *std::move(rules);
}

TEST(ExcludeRulesTest, DefaultsExcludeCommonSecretFiles) {
  ExcludeRules rules = Defaults();
  EXPECT_THAT(rules.Match(".env", false), Optional(std::string(".env")));
  EXPECT_THAT(rules.Match("app/.env.production", false), Optional(std::string(".env.*")));
  EXPECT_THAT(rules.Match("certs/server.pem", false), Optional(std::string("*.pem")));
  EXPECT_THAT(rules.Match("tls.key", false), Optional(std::string("*.key")));
  EXPECT_THAT(rules.Match("home/id_rsa", false), Optional(std::string("id_rsa*")));
  EXPECT_THAT(rules.Match("id_ed25519.pub", false), Optional(std::string("id_ed25519*")));
  EXPECT_THAT(rules.Match(".npmrc", false), Optional(std::string(".npmrc")));
  EXPECT_THAT(rules.Match("x/.netrc", false), Optional(std::string(".netrc")));
  EXPECT_THAT(rules.Match("infra/prod.tfstate", false), Optional(std::string("*.tfstate")));
  EXPECT_THAT(rules.Match("store.p12", false), Optional(std::string("*.p12")));
}

TEST(ExcludeRulesTest, LetsOrdinaryFilesIn) {
  ExcludeRules rules = Defaults();
  EXPECT_EQ(rules.Match("src/main.cc", false), std::nullopt);
  EXPECT_EQ(rules.Match("README.md", false), std::nullopt);
  EXPECT_EQ(rules.Match("environment.yml", false), std::nullopt);
  EXPECT_EQ(rules.Match("config.json", false), std::nullopt);
  EXPECT_EQ(rules.Match("docs/keys.md", false), std::nullopt);
  EXPECT_EQ(rules.Match("src", true), std::nullopt);
}

TEST(ExcludeRulesTest, DirectoryPatternMatchesDirectoryAnywhereAndEverythingUnderIt) {
  ExcludeRules rules = Defaults();
  EXPECT_THAT(rules.Match(".ssh", true), Optional(std::string(".ssh/")));
  EXPECT_THAT(rules.Match(".ssh/config", false), Optional(std::string(".ssh/")));
  EXPECT_THAT(rules.Match("home/u/.aws/credentials", false), Optional(std::string(".aws/")));
  EXPECT_THAT(rules.Match("a/.gnupg/sub/x", false), Optional(std::string(".gnupg/")));
}

TEST(ExcludeRulesTest, DirectoryPatternDoesNotMatchFileOfThatName) {
  ExcludeRules rules = Defaults();
  EXPECT_EQ(rules.Match(".ssh", false), std::nullopt);
  EXPECT_EQ(rules.Match("docs/.aws", false), std::nullopt);
}

TEST(ExcludeRulesTest, SlashPatternMatchesWholeComponentsAtAnyDepth) {
  ExcludeRules rules = Defaults();
  EXPECT_THAT(rules.Match(".docker/config.json", false),
              Optional(std::string(".docker/config.json")));
  EXPECT_THAT(rules.Match("home/.docker/config.json", false),
              Optional(std::string(".docker/config.json")));
  EXPECT_THAT(rules.Match("u/.kube/config", false), Optional(std::string(".kube/config")));
  // Component boundaries: no partial names, and the last component must match too.
  EXPECT_EQ(rules.Match("x.docker/config.json", false), std::nullopt);
  EXPECT_EQ(rules.Match(".docker/config.json.example", false), std::nullopt);
  EXPECT_EQ(rules.Match(".kube/config.d/readme", false), std::nullopt);
}

TEST(ExcludeRulesTest, StarDoesNotCrossSlash) {
  absl::StatusOr<ExcludeRules> rules = ExcludeRules::Create({"conf/*.secret"}, {});
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_THAT(rules->Match("conf/db.secret", false), Optional(std::string("conf/*.secret")));
  EXPECT_EQ(rules->Match("conf/sub/db.secret", false), std::nullopt);
}

TEST(ExcludeRulesTest, LeadingSlashAnchorsToRoot) {
  absl::StatusOr<ExcludeRules> rules = ExcludeRules::Create({"/config/master.key.txt"}, {});
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_THAT(rules->Match("config/master.key.txt", false),
              Optional(std::string("/config/master.key.txt")));
  EXPECT_EQ(rules->Match("app/config/master.key.txt", false), std::nullopt);
}

TEST(ExcludeRulesTest, RemoveTakesDefaultOut) {
  absl::StatusOr<ExcludeRules> rules = ExcludeRules::Create({}, {"*.pem", ".env.*"});
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(rules->Match("ca.pem", false), std::nullopt);
  EXPECT_EQ(rules->Match(".env.example", false), std::nullopt);
  EXPECT_THAT(rules->Match(".env", false), Optional(std::string(".env")));
  EXPECT_EQ(std::count(rules->patterns().begin(), rules->patterns().end(), "*.pem"), 0);
  EXPECT_EQ(rules->patterns().size(), DefaultSecretPatterns().size() - 2);
}

TEST(ExcludeRulesTest, RemoveUnknownPatternIsErrorNamingDefaults) {
  absl::StatusOr<ExcludeRules> rules = ExcludeRules::Create({}, {"*.PEM"});
  ASSERT_FALSE(rules.ok());
  EXPECT_EQ(rules.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rules.status().message(), HasSubstr("'*.PEM'"));
  EXPECT_THAT(rules.status().message(), HasSubstr("*.pem"));
  EXPECT_THAT(rules.status().message(), HasSubstr(".ssh/"));
}

TEST(ExcludeRulesTest, AddAppendsValidatedPatternOnce) {
  absl::StatusOr<ExcludeRules> rules = ExcludeRules::Create({"*.sqlite", "*.sqlite", "*.pem"}, {});
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_THAT(rules->Match("db/app.sqlite", false), Optional(std::string("*.sqlite")));
  EXPECT_EQ(rules->patterns().size(), DefaultSecretPatterns().size() + 1);
  EXPECT_EQ(rules->patterns().back(), "*.sqlite");
}

TEST(ExcludeRulesTest, AddRefusesBadPatterns) {
  for (const std::string& bad :
       {std::string(""), std::string("a\nb"), std::string("a\0b", 3), std::string("!keep.pem"),
        std::string("a/**/b"), std::string("/"), std::string("a//b"), std::string("../x")}) {
    absl::StatusOr<ExcludeRules> rules = ExcludeRules::Create({bad}, {});
    ASSERT_FALSE(rules.ok()) << "accepted: " << bad;
    EXPECT_EQ(rules.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(rules.status().message(), HasSubstr("exclude pattern"));
  }
}

TEST(ExcludeRulesTest, GlobBracketsAndQuestionMarkWork) {
  absl::StatusOr<ExcludeRules> rules = ExcludeRules::Create({"token[0-9].txt", "?.secret"}, {});
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_TRUE(rules->Match("a/token7.txt", false).has_value());
  EXPECT_FALSE(rules->Match("a/tokenx.txt", false).has_value());
  EXPECT_TRUE(rules->Match("k.secret", false).has_value());
  EXPECT_FALSE(rules->Match("kk.secret", false).has_value());
}

TEST(ExcludeRulesTest, EveryDefaultHasAReason) {
  for (const SecretPattern& p : DefaultSecretPatterns()) {
    EXPECT_NE(std::string(p.reason), "") << p.pattern;
  }
}

}  // namespace
}  // namespace abox::workspace
