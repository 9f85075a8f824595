#include "src/secrets/secret.h"

#include <memory>
#include <sstream>
#include <string>
#include <type_traits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spdlog/logger.h"
#include "spdlog/sinks/ostream_sink.h"

namespace abox::secrets {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Whether `os << value` compiles.
template <typename T, typename = void>
struct Streamable : std::false_type {};
template <typename T>
struct Streamable<T, std::void_t<decltype(std::declval<std::ostream&>() << std::declval<T>())>>
    : std::true_type {};

static_assert(!std::is_convertible_v<SecretValue, std::string>);
static_assert(!std::is_convertible_v<SecretValue, absl::string_view>);
static_assert(!std::is_copy_constructible_v<SecretValue>);
static_assert(!std::is_copy_assignable_v<SecretValue>);
static_assert(!Streamable<SecretValue>::value, "a SecretValue must not be printable with <<");

TEST(SecretValueTest, RevealsItsBytesExactly) {
  SecretValue value(std::string("a\0b\xff", 4));
  EXPECT_EQ(value.Reveal(), absl::string_view("a\0b\xff", 4));
  EXPECT_EQ(value.size(), 4u);
}

TEST(SecretValueTest, MovingEmptiesTheSource) {
  SecretValue a(std::string("ghp_short"));  // fits the small-string buffer
  SecretValue b(std::move(a));
  EXPECT_EQ(b.Reveal(), "ghp_short");
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  SecretValue c;
  c = std::move(b);
  EXPECT_EQ(c.Reveal(), "ghp_short");
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
}

TEST(SecretValueTest, TakingAStringWipesTheArgument) {
  std::string text = "short-token";
  SecretValue value(std::move(text));
  EXPECT_EQ(value.Reveal(), "short-token");
  EXPECT_TRUE(text.empty());  // NOLINT(bugprone-use-after-move)
}

TEST(SecretValueTest, CloneAndEquals) {
  SecretValue a(std::string("value-1"));
  SecretValue b = a.Clone();
  EXPECT_TRUE(a.Equals(b));
  EXPECT_FALSE(a.Equals(SecretValue(std::string("value-2"))));
  EXPECT_FALSE(a.Equals(SecretValue(std::string("value-"))));
}

TEST(SecretValueTest, FmtSpdlogAndGtestPrintRedacted) {
  SecretValue value(std::string("hunter2-do-not-print"));
  EXPECT_EQ(fmt::format("token={}", value), "token=<redacted>");

  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("test", sink);
  logger.set_pattern("%v");
  logger.info("token={}", value);
  logger.flush();
  EXPECT_EQ(out.str(), "token=<redacted>\n");

  EXPECT_EQ(::testing::PrintToString(value), "<redacted>");
}

TEST(SecretSpecTest, NamesAreEnvironmentVariableLike) {
  for (const char* ok : {"GITHUB_TOKEN", "_X", "A", "NPM_TOKEN_2"}) {
    EXPECT_TRUE(ValidateSecretName(ok).ok()) << ok;
  }
  EXPECT_TRUE(ValidateSecretName(std::string(64, 'A')).ok());
  for (const char* bad : {"", "2FA", "github_token", "GH-TOKEN", "GH TOKEN", "GH.TOKEN"}) {
    absl::Status s = ValidateSecretName(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("upper-case letters, digits and '_'"));
  }
  EXPECT_FALSE(ValidateSecretName(std::string(65, 'A')).ok());
}

TEST(SecretSpecTest, HostPatterns) {
  for (const char* ok : {"api.github.com", "github.com:443", "*.githubusercontent.com",
                         "registry.npmjs.org", "localhost", "x-1.example.io:8443"}) {
    EXPECT_TRUE(ValidateHostPattern(ok).ok()) << ok << ": " << ValidateHostPattern(ok);
  }
  for (const char* bad : {"", "API.github.com", "*.com", "*", "a.*.com", "-a.com", "a-.com",
                          "a..com", "github.com:0", "github.com:65536", "github.com:", "1.2.3.4",
                          "https://github.com", "github.com/path", "exa mple.com", "*github.com"}) {
    absl::Status s = ValidateHostPattern(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(ValidateHostPattern("API.github.com").message(), HasSubstr("lower-case DNS name"));
}

TEST(SecretSpecTest, FormatHasExactlyOnePlaceholder) {
  EXPECT_TRUE(ValidateFormat("Bearer {}").ok());
  EXPECT_TRUE(ValidateFormat("{}").ok());
  EXPECT_THAT(ValidateFormat("Bearer").message(), HasSubstr("exactly once"));
  EXPECT_FALSE(ValidateFormat("{} {}").ok());
  EXPECT_FALSE(ValidateFormat("Bearer {}\r\nX-Evil: 1").ok());
  EXPECT_TRUE(ValidateHeaderName("X-Api-Key").ok());
  EXPECT_FALSE(ValidateHeaderName("X Api").ok());
  EXPECT_FALSE(ValidateHeaderName("").ok());
}

SecretSpec Sample(SourceKind kind) {
  SecretSpec spec;
  spec.name = "GH_TOKEN";
  spec.hosts = {"api.github.com", "*.github.com:443"};
  spec.header = "X-Token";
  spec.format = "token {}";
  spec.allow_query = true;
  spec.source = kind;
  if (kind == SourceKind::kCommand) {
    spec.command.argv = {"pass", "show", "github/token"};
    spec.command.timeout = std::chrono::milliseconds(2500);
  } else if (kind == SourceKind::kVault) {
    spec.vault = {.addr = "https://vault.example.com:8200",
                  .mount = "kv",
                  .path = "ci/github",
                  .key = "token"};
  }
  return spec;
}

TEST(SecretSpecTest, JsonRoundTripsEverySourceKind) {
  for (SourceKind kind : {SourceKind::kStored, SourceKind::kCommand, SourceKind::kVault}) {
    SecretSpec spec = Sample(kind);
    nlohmann::json json = SecretSpecToJson(spec);
    auto back = ParseSecretSpec(json.dump());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(SecretSpecToJson(*back), json);
    EXPECT_EQ(back->source, kind);
  }
  auto command = SecretSpecFromJson(SecretSpecToJson(Sample(SourceKind::kCommand)));
  ASSERT_TRUE(command.ok());
  EXPECT_EQ(command->command.argv, (std::vector<std::string>{"pass", "show", "github/token"}));
  EXPECT_EQ(command->command.timeout, std::chrono::milliseconds(2500));
}

TEST(SecretSpecTest, JsonDefaults) {
  auto spec = ParseSecretSpec(R"({"name": "NPM_TOKEN", "hosts": ["registry.npmjs.org"]})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->header, "Authorization");
  EXPECT_EQ(spec->format, "Bearer {}");
  EXPECT_FALSE(spec->allow_query);
  EXPECT_EQ(spec->source, SourceKind::kStored);
}

TEST(SecretSpecTest, JsonErrorsSayWhatToDo) {
  struct Case {
    const char* json;
    const char* message;
  };
  for (const Case& c : {
           Case{"not json", "does not parse"},
           Case{"[]", "JSON object"},
           Case{R"({"name": "A", "hosts": ["a.com"], "hots": []})", "unknown field \"hots\""},
           Case{R"({"name": "a", "hosts": ["a.com"]})", "upper-case"},
           Case{R"({"name": "A", "hosts": []})", "--host"},
           Case{R"({"name": "A"})", "--host"},
           Case{R"({"name": "A", "hosts": "a.com"})", "list of strings"},
           Case{R"({"name": "A", "hosts": ["a.com"], "allow_query": "yes"})", "true or false"},
           Case{R"({"name": "A", "hosts": ["a.com"], "source": {"kind": "env"}})",
                "stored, command or vault"},
           Case{R"({"name": "A", "hosts": ["a.com"], "source": {"kind": "command"}})", "argv[0]"},
           Case{R"({"name": "A", "hosts": ["a.com"], "source": {"kind": "command",
                "argv": ["x"], "timeout_ms": "10"}})",
                "milliseconds"},
           Case{R"({"name": "A", "hosts": ["a.com"], "source": {"kind": "vault", "path": "p"}})",
                "needs its key"},
           Case{R"({"name": "A", "hosts": ["a.com"], "source": {"kind": "vault", "path": "../p",
                "key": "k"}})",
                "'..'"},
           Case{R"({"name": "A", "hosts": ["a.com"], "source": {"kind": "vault", "path": "a b",
                "key": "k"}})",
                "printable ASCII"},
           Case{R"({"name": "A", "hosts": ["a.com"], "source": {"kind": "vault",
                "addr": "vault:8200", "path": "p", "key": "k"}})",
                "https://"},
       }) {
    auto spec = ParseSecretSpec(c.json);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.message)) << c.json;
  }
}

TEST(SecretSpecTest, CleanseJsonEmptiesEveryString) {
  nlohmann::json doc = {{"a", "secret-1"}, {"b", {{"c", {"secret-2", 3}}}}};
  CleanseJson(doc);
  EXPECT_THAT(doc.dump(), Not(HasSubstr("secret")));
  EXPECT_EQ(doc["b"]["c"][1], 3);
}

}  // namespace
}  // namespace abox::secrets
