// `abox agent login|logout|status|usage` and `abox create --model` against the real daemon over
// a fake VMM (aboxd-fake-vmm, whose "guest" commands run on this host): the key is stored on the
// host and never printed; a sandbox given a model API gets the broker's guest URL and a token of
// its own in every command, never the key; errors say what to type.
#include "src/cli/agent_commands.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/http/testing/test_server.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/cli_daemon_test.h"

namespace abox::cli {
namespace {

using testing::AboxCall;
using testing::AboxResult;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kKey[] = "sk-ant-test-0123456789abcdefghij";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using AgentCommandsTest = testing::CliDaemonTest;

TEST_F(AgentCommandsTest, LoginStoresTheKeyOnTheHostAndNeverPrintsIt) {
  AboxResult before = Abox({"agent", "status"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_THAT(before.out, HasSubstr("missing: abox agent login anthropic"));
  EXPECT_THAT(before.out, HasSubstr("https://api.anthropic.com"));

  AboxResult login = Abox({"agent", "login", "anthropic", "--stdin"}, std::string(kKey) + "\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  EXPECT_THAT(login.out, HasSubstr("anthropic: key in secret ANTHROPIC_API_KEY"));
  AboxResult status = Abox({"agent", "status", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  nlohmann::json providers = nlohmann::json::parse(status.out, nullptr, false);
  ASSERT_TRUE(providers.is_object()) << status.out;
  EXPECT_EQ(providers["providers"][0]["api"], "anthropic");
  EXPECT_EQ(providers["providers"][0]["key_stored"], true);
  EXPECT_EQ(providers["providers"][1]["key_stored"], false);
  // Bound to the provider's host, sent as the header the API reads.
  AboxResult secrets = Abox({"secret", "ls"});
  EXPECT_THAT(secrets.out, HasSubstr("api.anthropic.com"));
  EXPECT_THAT(secrets.out, HasSubstr("x-api-key: {}"));
  for (const std::string& out : {before.out, login.out, login.err, status.out, secrets.out}) {
    EXPECT_THAT(out, Not(HasSubstr(kKey)));
  }
  const std::string db =
      ReadAll(dir_.path() + "/home/state.db") + ReadAll(dir_.path() + "/home/state.db-wal");
  EXPECT_THAT(db, Not(HasSubstr(kKey)));

  // A local OpenAI-compatible server, its key from the environment under a name of ours.
  AboxResult local = Abox({"agent", "login", "openai", "--secret", "LOCAL_KEY", "--from-env",
                           "MY_KEY", "--base-url", "http://127.0.0.1:8080/compat"},
                          "", {{"MY_KEY", "local-key-0123456789"}});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  EXPECT_THAT(Abox({"agent", "status"}).out, HasSubstr("http://127.0.0.1:8080/compat"));
  AboxResult out = Abox({"agent", "logout", "openai"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_THAT(Abox({"agent", "status"}).out, HasSubstr("https://api.openai.com"));
  EXPECT_NE(Abox({"agent", "logout", "openai"}).exit_code, 0);  // nothing set any more
}

TEST_F(AgentCommandsTest, BadInputSaysWhatToType) {
  AboxResult api = Abox({"agent", "login", "gemini", "--stdin"}, "k\n");
  EXPECT_EQ(api.exit_code, 2);
  EXPECT_THAT(api.err, HasSubstr("use anthropic or openai"));
  AboxResult plain =
      Abox({"agent", "login", "openai", "--stdin", "--base-url", "http://models.example.com/v1"},
           "key-0123456789\n");
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_THAT(plain.err, HasSubstr("base_url"));
  AboxResult empty = Abox({"agent", "login", "anthropic", "--stdin"}, "\n");
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_THAT(empty.err, HasSubstr("empty"));
  AboxResult no_secret = Abox({"agent", "login", "anthropic", "--secret", "NOT_THERE"});
  EXPECT_NE(no_secret.exit_code, 0);
  EXPECT_THAT(no_secret.err, HasSubstr("no secret named NOT_THERE"));
  AboxResult model = Abox({"create", "--name", "m", "--model", "anthropic"});
  EXPECT_NE(model.exit_code, 0);
  EXPECT_THAT(model.err, HasSubstr("abox agent login anthropic"));
  AboxResult bad_model = Abox({"create", "--name", "m", "--model", "gemini"});
  EXPECT_NE(bad_model.exit_code, 0);
}

TEST_F(AgentCommandsTest, ASandboxGivenAModelApiGetsTheBrokerNotTheKey) {
  ASSERT_EQ(Abox({"agent", "login", "anthropic", "--stdin"}, std::string(kKey) + "\n").exit_code,
            0);
  AboxResult created = Abox({"create", "--name", "agent", "--model", "anthropic", "--json"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  nlohmann::json sandbox = nlohmann::json::parse(created.out, nullptr, false);
  ASSERT_TRUE(sandbox.is_object()) << created.out;
  EXPECT_THAT(sandbox["models"], ElementsAre("anthropic"));
  AboxResult env = Abox({"exec", "agent", "--", "sh", "-c",
                         "echo \"$ANTHROPIC_BASE_URL|$ANTHROPIC_API_KEY|$OPENAI_API_KEY|"
                         "$CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\""});
  ASSERT_EQ(env.exit_code, 0) << env.err;
  EXPECT_THAT(env.out, HasSubstr("http://127.0.0.1:15080/anthropic|abox-broker-"));
  EXPECT_THAT(env.out, HasSubstr("||1"));  // no OpenAI token: not given that API
  EXPECT_THAT(env.out, Not(HasSubstr(kKey)));
  // The key itself is refused on its way in.
  AboxResult smuggled = Abox({"exec", "-e", std::string("K=") + kKey, "agent", "--", "true"});
  EXPECT_NE(smuggled.exit_code, 0);
  EXPECT_THAT(smuggled.err, HasSubstr("ANTHROPIC_API_KEY"));
  EXPECT_THAT(smuggled.err, Not(HasSubstr(kKey)));

  AboxResult usage = Abox({"agent", "usage", "agent"});
  ASSERT_EQ(usage.exit_code, 0) << usage.err;
  EXPECT_THAT(usage.out, HasSubstr("no model requests"));
  AboxResult plain = Abox({"create", "--name", "plain"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  AboxResult reuse = Abox({"agent", "claude", "--sandbox", "plain", "--prompt", "hi"});
  EXPECT_EQ(reuse.exit_code, 125);
  EXPECT_THAT(reuse.err, HasSubstr("was not given the anthropic API"));
}

TEST(AgentArgvTest, HeadlessAndInteractiveForEachAgent) {
  EXPECT_THAT(AgentArgv({.agent = "claude", .prompt = "fix it", .model = "opus"}),
              ElementsAre("claude", "-p", "fix it", "--output-format", "stream-json", "--verbose",
                          "--dangerously-skip-permissions", "--model", "opus"));
  EXPECT_THAT(AgentArgv({.agent = "claude", .skip_permissions = false, .extra = {"--debug"}}),
              ElementsAre("claude", "--debug"));
  EXPECT_THAT(AgentArgv({.agent = "codex", .prompt = "fix it"}),
              ElementsAre("codex", "exec", "--skip-git-repo-check", "--json",
                          "--dangerously-bypass-approvals-and-sandbox", "fix it"));
  EXPECT_THAT(AgentArgv({.agent = "codex"}),
              ElementsAre("codex", "--dangerously-bypass-approvals-and-sandbox"));
  // Codex's config names the variable that holds the token; it never expands it into the file.
  std::string codex = AgentSetupScript("codex");
  EXPECT_THAT(codex, HasSubstr("env_key = \"OPENAI_API_KEY\""));
  EXPECT_THAT(codex, Not(HasSubstr("$OPENAI_API_KEY")));
  EXPECT_THAT(codex, Not(HasSubstr("${OPENAI_API_KEY")));
}

}  // namespace
}  // namespace abox::cli
