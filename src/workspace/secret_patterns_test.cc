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

TEST(ExcludeRulesTest, DefaultsExcludeCloudAndToolCredentials) {
  ExcludeRules rules = Defaults();
  const std::pair<const char*, const char*> cases[] = {
      {".envrc", ".envrc"},
      {"svc/.envrc", ".envrc"},
      {".cargo/credentials", ".cargo/credentials*"},
      {"home/.cargo/credentials.toml", ".cargo/credentials*"},
      {"infra/prod.tfvars", "*.tfvars"},
      {"infra/x.auto.tfvars", "*.tfvars"},
      {"infra/x.tfvars.json", "*.tfvars.json"},
      {".config/gh/hosts.yml", ".config/gh/hosts.yml"},
      {"home/u/.config/gh/hosts.yml", ".config/gh/hosts.yml"},
      {".config/gcloud/application_default_credentials.json", ".config/gcloud/"},
      {"auth.json", "auth.json"},
      {"php/auth.json", "auth.json"},
      {".s3cfg", ".s3cfg"},
      {".boto", ".boto"},
      {".my.cnf", ".my.cnf"},
      {".netrc", ".netrc"},
      {".pypirc", ".pypirc"},
      {".git-credentials", ".git-credentials"},
      {".terraform.d/credentials.tfrc.json", ".terraform.d/credentials.tfrc.json"},
  };
  for (const auto& [path, pattern] : cases) {
    EXPECT_THAT(rules.Match(path, false), Optional(std::string(pattern))) << path;
  }
  EXPECT_EQ(rules.Match(".cargo/config.toml", false), std::nullopt);
  EXPECT_EQ(rules.Match(".config/gh/config.yml", false), std::nullopt);
  EXPECT_EQ(rules.Match("variables.tf", false), std::nullopt);
  EXPECT_EQ(rules.Match("oauth.json.md", false), std::nullopt);
}

TEST(SecretContentTest, FindsGcpServiceAccountKeysByContent) {
  const std::string key = R"({
  "type": "service_account",
  "project_id": "demo-123",
  "private_key_id": "abc",
  "private_key": "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n",
  "client_email": "ci@demo-123.iam.gserviceaccount.com"
})";
  std::optional<std::string> why = SecretContentReason(key);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("service-account"));
  // Other spacing, a byte-order mark, the member not first.
  EXPECT_TRUE(
      SecretContentReason("\xEF\xBB\xBF  {\"project_id\":\"p\",\"type\" :\t\"service_account\"}")
          .has_value());
  EXPECT_TRUE(
      SecretContentReason("{\"type\":\"service_account\"").has_value());  // cut at the probe
}

TEST(SecretContentTest, ProbesOnlySmallJsonFiles) {
  EXPECT_TRUE(ShouldProbeSecretContent("my-project-3f2a1b.json", 2300));
  EXPECT_TRUE(ShouldProbeSecretContent("keys/SA.JSON", 2300));
  EXPECT_FALSE(ShouldProbeSecretContent("big.json", (1 << 20) + 1));
  EXPECT_FALSE(ShouldProbeSecretContent("src/main.cc", 100));
  EXPECT_FALSE(ShouldProbeSecretContent(".json", 100));
  EXPECT_FALSE(ShouldProbeSecretContent("notes.json.md", 100));
}

TEST(SecretContentTest, LeavesOrdinaryFilesIn) {
  EXPECT_EQ(SecretContentReason(""), std::nullopt);
  EXPECT_EQ(SecretContentReason("{\"type\": \"module\", \"name\": \"x\"}"), std::nullopt);
  EXPECT_EQ(SecretContentReason("{\"type\": \"authorized_user\"}"), std::nullopt);
  // Code and docs that mention the marker are not a key file.
  EXPECT_EQ(SecretContentReason("if (j[\"type\"] == \"service_account\") {}\n"), std::nullopt);
  EXPECT_EQ(SecretContentReason("# Keys\nA key has `\"type\": \"service_account\"`.\n"),
            std::nullopt);
  EXPECT_EQ(SecretContentReason("{\"kind\": \"type\", \"x\": \"service_account\"}"), std::nullopt);
  EXPECT_EQ(SecretContentReason("{\"type\": \"service_accounts\"}"), std::nullopt);
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
