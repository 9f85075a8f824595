// The real `abox` binary's `abox mcp` commands on a scratch HOME, CODEX_HOME, ABOX_HOME and
// project: what a person types and sees (no daemon involved).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/abox_runner.h"

namespace abox::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::AboxCall;
using testing::AboxResult;
using ::testing::HasSubstr;
using ::testing::Not;

class McpCommandsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ::setenv("ABOX_BIN", ABOX_CLI_BIN, 1);  // NOLINT(concurrency-mt-unsafe): before any thread
  }
  McpCommandsTest() {
    std::string tmpl = (fs::temp_directory_path() / "abox-mcp-cli.XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    fs::create_directories(root_ / "home");
    fs::create_directories(project());
    server_ = (root_ / "bin" / "abox-mcp").string();
    fs::create_directories(root_ / "bin");
    std::ofstream(server_) << "#!/bin/sh\n";
    ::chmod(server_.c_str(), 0755);
  }
  ~McpCommandsTest() override { fs::remove_all(root_); }

  [[nodiscard]] std::string project() const { return (root_ / "project").string(); }

  AboxResult Abox(std::vector<std::string> args) {
    AboxCall call;
    call.args = std::move(args);
    call.env = {{"HOME", (root_ / "home").string()},
                {"CODEX_HOME", (root_ / "codex").string()},
                {"ABOX_HOME", (root_ / "abox").string()},
                {"ABOX_MCP_BIN", server_},
                {"XDG_DATA_HOME", ""}};
    call.timeout_seconds = 60;
    return testing::RunAbox(call);
  }

  fs::path root_;
  std::string server_;
};

TEST_F(McpCommandsTest, DryRunSaysWhatWouldChangeAndWritesNothing) {
  AboxResult r = Abox({"mcp", "install", "claude", "--project", project(), "--dry-run"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Dry run, nothing written"));
  EXPECT_THAT(r.out, HasSubstr("would create    " + project() + "/.mcp.json\n"));
  EXPECT_THAT(r.out, HasSubstr("would create    " + project() + "/.claude/skills/abox/SKILL.md"));
  EXPECT_THAT(r.out, HasSubstr("      +    \"abox\": {\n"));
  EXPECT_THAT(r.out, HasSubstr("Server: " + server_ + "\n"));
  EXPECT_TRUE(fs::is_empty(project()));
  EXPECT_FALSE(fs::exists(root_ / "abox"));
}

TEST_F(McpCommandsTest, InstallStatusAndUninstall) {
  AboxResult installed = Abox({"mcp", "install", "codex", "--global", "--allow-apply", "--json"});
  ASSERT_EQ(installed.exit_code, 0) << installed.err;
  json report = json::parse(installed.out, nullptr, false);
  EXPECT_EQ(report["changed"], true);
  EXPECT_EQ(report["server"]["args"], json({"--allow-apply"}));
  EXPECT_EQ(report["files"][0]["path"], (root_ / "codex" / "config.toml").string());

  AboxResult again = Abox({"mcp", "install", "codex", "--global", "--allow-apply"});
  EXPECT_THAT(again.out, HasSubstr("already installed"));

  AboxResult status = Abox({"mcp", "status", "--project", project(), "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  json rows = json::parse(status.out, nullptr, false);
  ASSERT_TRUE(rows.is_array());
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[3]["client"], "codex");
  EXPECT_EQ(rows[3]["scope"], "global");
  EXPECT_EQ(rows[3]["installed"], true);
  EXPECT_EQ(rows[3]["command_executable"], true);
  EXPECT_EQ(rows[0]["installed"], false);
  AboxResult table = Abox({"mcp", "status", "--project", project()});
  EXPECT_THAT(table.out, HasSubstr("codex   global   yes        --allow-apply  ok"));

  AboxResult removed = Abox({"mcp", "uninstall", "codex", "--global"});
  EXPECT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_THAT(removed.out, HasSubstr("Uninstalled abox from Codex, global"));
  EXPECT_FALSE(fs::exists(root_ / "codex"));
}

TEST_F(McpCommandsTest, MistakesAreRefusedWithWhatToType) {
  AboxResult typo = Abox({"mcp", "install", "claude", "--alow-apply"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(
      typo.err,
      HasSubstr("abox mcp install: unknown flag --alow-apply; did you mean --allow-apply?"));
  AboxResult client = Abox({"mcp", "install", "clade", "--project", project()});
  EXPECT_NE(client.exit_code, 0);
  EXPECT_THAT(client.err, HasSubstr("did you mean claude?"));
  AboxResult both = Abox({"mcp", "install", "cursor", "--global", "--project", project()});
  EXPECT_NE(both.exit_code, 0);
  EXPECT_THAT(both.err, HasSubstr("excludes"));
  std::ofstream(project() + "/.mcp.json") << "{ nope";
  AboxResult bad = Abox({"mcp", "install", "claude", "--project", project()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr(project() + "/.mcp.json is not valid JSON"));
  EXPECT_THAT(bad.out, Not(HasSubstr("Installed")));
  AboxResult help = Abox({"mcp", "install", "--help"});
  EXPECT_THAT(help.out, HasSubstr("yours, never the model's"));
}

}  // namespace
}  // namespace abox::cli
