// `abox secret set|ls|rm` against the real daemon over a fake VMM (aboxd-fake-vmm), which abox
// starts on demand: values from the environment, a file, stdin or a command; never in argv,
// the output or the state database; errors that say what to type.
#include <sys/stat.h>

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
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kValue[] = "s3cr3t-value-0123456789";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using SecretCommandsTest = testing::CliDaemonTest;

TEST_F(SecretCommandsTest, SetListAndRemoveFromEachSource) {
  AboxResult piped = Abox({"secret", "set", "GH_TOKEN", "--host", "api.github.com", "--host",
                           "uploads.github.com", "--stdin"},
                          std::string(kValue) + "\n");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_THAT(piped.out, HasSubstr("secret GH_TOKEN set: for api.github.com,uploads.github.com, "
                                   "as Authorization: Bearer {}; value from file "));

  const std::string file = dir_.path() + "/npm-token";
  std::ofstream(file) << "npm-value-abcdef\n";
  AboxResult from_file = Abox({"secret", "set", "NPM_TOKEN", "--host", "registry.npmjs.org",
                               "--from-file", file, "--header", "X-Npm", "--format", "{}"});
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  AboxResult from_env = Abox({"secret", "set", "ENV_TOKEN", "--host", "api.example.com",
                              "--from-env", "MY_TOKEN", "--allow-query"},
                             "", {{"MY_TOKEN", "env-value-abcdef"}});
  ASSERT_EQ(from_env.exit_code, 0) << from_env.err;
  AboxResult from_command = Abox({"secret", "set", "CMD_TOKEN", "--host", "api.example.com",
                                  "--from-command", "--", "/bin/echo", "cmd-value"});
  ASSERT_EQ(from_command.exit_code, 0) << from_command.err;
  EXPECT_THAT(from_command.out, HasSubstr("value from command /bin/echo"));

  AboxResult listed = Abox({"secret", "ls"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("NAME"));
  EXPECT_THAT(listed.out, HasSubstr("X-Npm: {}"));
  EXPECT_THAT(listed.out, HasSubstr("Authorization: Bearer {} (and the query)"));
  AboxResult json = Abox({"secret", "ls", "--json"});
  nlohmann::json all = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_TRUE(all.is_object()) << json.out;
  EXPECT_EQ(all["secrets"].size(), 4u);
  for (const std::string& out : {listed.out, json.out, piped.out, from_file.out, from_env.out}) {
    EXPECT_THAT(out, Not(HasSubstr(kValue)));
    EXPECT_THAT(out, Not(HasSubstr("npm-value")));
    EXPECT_THAT(out, Not(HasSubstr("env-value")));
  }
  // The stored values are in the 0600 file, and not in the state database.
  const std::string values = dir_.path() + "/home/secrets/values.json";
  struct stat st {};
  ASSERT_EQ(::stat(values.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string db =
      ReadAll(dir_.path() + "/home/state.db") + ReadAll(dir_.path() + "/home/state.db-wal");
  EXPECT_THAT(db, HasSubstr("registry.npmjs.org"));
  EXPECT_THAT(db, Not(HasSubstr(kValue)));
  EXPECT_THAT(db, Not(HasSubstr("npm-value")));

  AboxResult removed = Abox({"secret", "rm", "GH_TOKEN", "NOPE"});
  EXPECT_EQ(removed.exit_code, 1);
  EXPECT_EQ(removed.out, "GH_TOKEN\n");
  EXPECT_THAT(removed.err, HasSubstr("no secret named NOPE"));
  EXPECT_THAT(Abox({"secret", "ls"}).out, Not(HasSubstr("GH_TOKEN")));
}

TEST_F(SecretCommandsTest, BadInputSaysWhatToType) {
  AboxResult no_source = Abox({"secret", "set", "A_TOKEN", "--host", "api.example.com"});
  EXPECT_EQ(no_source.exit_code, 2);
  EXPECT_THAT(no_source.err, HasSubstr("exactly one of --from-env VAR"));
  AboxResult two = Abox(
      {"secret", "set", "A_TOKEN", "--host", "api.example.com", "--stdin", "--from-env", "HOME"});
  EXPECT_EQ(two.exit_code, 2);
  AboxResult unset = Abox({"secret", "set", "A_TOKEN", "--host", "api.example.com", "--from-env",
                           "ABOX_TEST_SURELY_UNSET"});
  EXPECT_EQ(unset.exit_code, 2);
  EXPECT_THAT(unset.err, HasSubstr("$ABOX_TEST_SURELY_UNSET is not set"));
  AboxResult no_host = Abox({"secret", "set", "A_TOKEN", "--stdin"}, "x\n");
  EXPECT_NE(no_host.exit_code, 0);
  EXPECT_THAT(no_host.err, HasSubstr("--host"));
  AboxResult bad_name =
      Abox({"secret", "set", "a-token", "--host", "api.example.com", "--stdin"}, "value\n");
  EXPECT_EQ(bad_name.exit_code, 1);
  EXPECT_THAT(bad_name.err, HasSubstr("like an environment variable"));
  AboxResult two_lines = Abox({"secret", "set", "A_TOKEN", "--host", "api.example.com", "--stdin"},
                              "line-one\nline-two\n");
  EXPECT_EQ(two_lines.exit_code, 1);
  EXPECT_THAT(two_lines.err, HasSubstr("line break"));
  EXPECT_THAT(two_lines.err, Not(HasSubstr("line-one")));
  AboxResult failing = Abox({"secret", "set", "A_TOKEN", "--host", "api.example.com",
                             "--from-command", "--", "/bin/false"});
  EXPECT_EQ(failing.exit_code, 1);
  EXPECT_THAT(failing.err, HasSubstr("reading secret A_TOKEN from its command failed"));
  AboxResult vault =
      Abox({"secret", "set", "A_TOKEN", "--host", "api.example.com", "--vault", "no-key-here"});
  EXPECT_EQ(vault.exit_code, 2);
  EXPECT_THAT(vault.err, HasSubstr("PATH#KEY"));
  // Nothing refused was kept.
  EXPECT_THAT(Abox({"secret", "ls"}).out, HasSubstr("no secrets"));
}

}  // namespace
}  // namespace abox::cli
