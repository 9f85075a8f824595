#include "src/cli/mcp_install.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/cli/mcp_status.h"
#include "src/cli/toml_check.h"

namespace abox::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const absl::Time kNow = absl::FromUnixSeconds(1764633600);

class McpInstallTest : public ::testing::Test {
 protected:
  McpInstallTest() {
    std::string tmpl = (fs::temp_directory_path() / "abox-mcp-install.XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    paths_ = {.home = root_ / "home",
              .codex_home = root_ / "home" / ".codex",
              .abox_home = root_ / "abox",
              .project = root_ / "project"};
    fs::create_directories(paths_.home);
    fs::create_directories(paths_.project);
    server_.command = (root_ / "bin" / "abox-mcp").string();
    fs::create_directories(root_ / "bin");
    Write(server_.command, "#!/bin/sh\n");
    ::chmod(server_.command.c_str(), 0755);
  }
  ~McpInstallTest() override { fs::remove_all(root_); }

  static std::string Read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void Write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }
  McpReport Install(McpClient client, McpScope scope, bool dry_run = false) {
    absl::StatusOr<McpReport> r = InstallMcp(paths_, client, scope, server_, dry_run, kNow);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : McpReport{};
  }
  McpReport Uninstall(McpClient client, McpScope scope) {
    absl::StatusOr<McpReport> r = UninstallMcp(paths_, client, scope, false, kNow);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : McpReport{};
  }
  int BackupCount() const {
    std::error_code ec;
    int n = 0;
    for (auto it = fs::directory_iterator(paths_.abox_home / "mcp-backups", ec);
         !ec && it != fs::directory_iterator(); ++it) {
      ++n;
    }
    return n;
  }
  static std::vector<std::string> Actions(const McpReport& report) {
    std::vector<std::string> actions;
    for (const FileChange& f : report.files) {
      actions.emplace_back(FileActionName(f.action));
    }
    return actions;
  }

  fs::path root_;
  McpPaths paths_;
  McpServerCommand server_{.args = {"--allow-apply"}};
};

TEST_F(McpInstallTest, ClaudeProjectFreshInstallReinstallAndUninstall) {
  McpReport report = Install(McpClient::kClaude, McpScope::kProject);
  EXPECT_THAT(Actions(report), ElementsAre("create", "create"));
  json config = json::parse(Read(paths_.project / ".mcp.json"), nullptr, false);
  EXPECT_EQ(
      config["mcpServers"]["abox"],
      json({{"command", server_.command}, {"args", {"--allow-apply"}}, {"env", json::object()}}));
  std::string skill = Read(paths_.project / ".claude/skills/abox/SKILL.md");
  EXPECT_THAT(skill, StartsWith("---\nname: abox\ndescription: "));
  EXPECT_THAT(skill, HasSubstr("abox apply"));
  EXPECT_THAT(skill, HasSubstr("egress_request"));
  ASSERT_EQ(BackupCount(), 1);
  json manifest = json::parse(Read(report.backup_dir + "/manifest.json"), nullptr, false);
  EXPECT_EQ(manifest["files"].size(), 2u);
  EXPECT_EQ(manifest["files"][0]["existed"], false);

  McpReport again = Install(McpClient::kClaude, McpScope::kProject);
  EXPECT_FALSE(again.changed());
  EXPECT_THAT(Actions(again), ElementsAre("unchanged", "unchanged"));
  EXPECT_EQ(BackupCount(), 1);

  McpReport removed = Uninstall(McpClient::kClaude, McpScope::kProject);
  EXPECT_THAT(Actions(removed), ElementsAre("remove", "remove"));
  EXPECT_TRUE(fs::is_empty(paths_.project)) << "the files and .claude/skills/abox are gone";
  EXPECT_FALSE(Uninstall(McpClient::kClaude, McpScope::kProject).changed());
}

TEST_F(McpInstallTest, ClaudeGlobalKeepsEveryOtherByteOfClaudeJson) {
  const std::string original =
      "{\n"
      "  \"numStartups\": 42,\n"
      "  \"theme\": \"dark\",\n"
      "  \"mcpServers\": {\n"
      "    \"github\": {\n"
      "      \"command\": \"npx\",\n"
      "      \"args\": [\"-y\", \"@modelcontextprotocol/server-github\"]\n"
      "    }\n"
      "  },\n"
      "  \"projects\": {\"/p\": {\"allowedTools\": [], \"mcpServers\": {}}},\n"
      "  \"userID\": \"\\u00e9t\\u00e9\",\n"
      "  \"ratio\": 1.50e0\n"
      "}\n";
  fs::path file = paths_.home / ".claude.json";
  Write(file, original);
  ::chmod(file.c_str(), 0600);

  Install(McpClient::kClaude, McpScope::kGlobal);
  std::string installed = Read(file);
  json config = json::parse(installed, nullptr, false);
  EXPECT_EQ(config["mcpServers"]["abox"]["command"], server_.command);
  EXPECT_EQ(config["mcpServers"]["github"]["command"], "npx");
  EXPECT_TRUE(config["projects"]["/p"]["mcpServers"].empty()) << "only the top-level servers";
  EXPECT_THAT(installed, StartsWith(original.substr(0, original.find("    }\n  },"))));
  EXPECT_THAT(installed, HasSubstr("\"userID\": \"\\u00e9t\\u00e9\",\n  \"ratio\": 1.50e0\n}\n"));
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(fs::exists(paths_.home / ".claude/skills/abox/SKILL.md"));

  // A changed flag set changes only abox's entry.
  server_.args = {"--allow-egress-changes", "--allow-remove-any"};
  McpReport changed = Install(McpClient::kClaude, McpScope::kGlobal);
  EXPECT_THAT(Actions(changed), ElementsAre("update", "unchanged"));
  std::string updated = Read(file);
  json updated_config = json::parse(updated, nullptr, false);
  EXPECT_EQ(updated_config["mcpServers"]["abox"]["args"],
            json({"--allow-egress-changes", "--allow-remove-any"}));
  updated_config["mcpServers"]["abox"]["args"] = config["mcpServers"]["abox"]["args"];
  EXPECT_EQ(updated_config, config);
  EXPECT_EQ(BackupCount(), 2);
  EXPECT_EQ(Read(changed.files[0].backup), installed) << "the backup holds the bytes before";

  Uninstall(McpClient::kClaude, McpScope::kGlobal);
  EXPECT_EQ(Read(file), original);
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(fs::exists(paths_.home / ".claude")) << "the directories install created";
}

TEST_F(McpInstallTest, ClaudeUninstallKeepsWhatThePersonAddedSince) {
  Write(paths_.project / ".mcp.json", "{\"mcpServers\": {}}\n");
  Install(McpClient::kClaude, McpScope::kProject);
  std::string installed = Read(paths_.project / ".mcp.json");
  // The person adds a server after abox's.
  std::string edited = installed;
  edited.insert(edited.rfind("\n}}"), ",\n  \"mine\": {\"command\": \"m\"}");
  Write(paths_.project / ".mcp.json", edited);
  Uninstall(McpClient::kClaude, McpScope::kProject);
  json left = json::parse(Read(paths_.project / ".mcp.json"), nullptr, false);
  EXPECT_EQ(left, json::parse(R"({"mcpServers": {"mine": {"command": "m"}}})"));
}

TEST_F(McpInstallTest, CodexKeepsCommentsAndOtherServersByteForByte) {
  const std::string original =
      "# my Codex config\n"
      "model = \"gpt-5-codex\"  # the default\n"
      "\n"
      "[mcp_servers.github]\n"
      "command = \"npx\"\n"
      "args = [\n"
      "  \"-y\",  # yes\n"
      "  \"@modelcontextprotocol/server-github\",\n"
      "]\n"
      "[mcp_servers.github.env]\n"
      "GITHUB_TOKEN_FILE = \"~/.gh\"\n"
      "\n"
      "# profiles\n"
      "[profiles.fast]\n"
      "model = \"o4-mini\"\n";
  const std::string agents = "# Agents\n\nRun `make test` before committing.\n";
  Write(paths_.codex_home / "config.toml", original);
  Write(paths_.codex_home / "AGENTS.md", agents);

  McpReport report = Install(McpClient::kCodex, McpScope::kGlobal);
  EXPECT_THAT(Actions(report), ElementsAre("update", "update"));
  std::string installed = Read(paths_.codex_home / "config.toml");
  EXPECT_THAT(installed, StartsWith(original));
  EXPECT_THAT(installed, HasSubstr("\n[mcp_servers.abox]\ncommand = \"" + server_.command +
                                   "\"\nargs = [\"--allow-apply\"]\n"));
  EXPECT_THAT(installed, HasSubstr("startup_timeout_sec = 20\n"));
  EXPECT_THAT(installed, HasSubstr("tool_timeout_sec = 120\n"));
  // Sandbox-only tools run without a prompt each time; the one that writes the host still asks.
  EXPECT_THAT(installed, HasSubstr("tools.exec.approval_mode = \"approve\"\n"));
  EXPECT_THAT(installed, HasSubstr("tools.sandbox_remove.approval_mode = \"approve\"\n"));
  EXPECT_THAT(installed, Not(HasSubstr("tools.apply_changes")));
  EXPECT_TRUE(CheckToml("c", installed).ok());
  absl::StatusOr<std::optional<TomlServer>> read = ReadTomlServer("c", installed, "abox");
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status();
  EXPECT_EQ((*read)->command, server_.command);
  std::string agents_md = Read(paths_.codex_home / "AGENTS.md");
  EXPECT_THAT(agents_md, StartsWith(agents + "\n<!-- abox:begin -->\n"));
  EXPECT_THAT(agents_md, HasSubstr("<!-- abox:end -->\n"));

  EXPECT_FALSE(Install(McpClient::kCodex, McpScope::kGlobal).changed());
  EXPECT_EQ(BackupCount(), 1);

  server_.args = {};
  McpReport changed = Install(McpClient::kCodex, McpScope::kGlobal);
  EXPECT_THAT(Actions(changed), ElementsAre("update", "unchanged"));
  std::string updated = Read(paths_.codex_home / "config.toml");
  EXPECT_THAT(updated, StartsWith(original));
  EXPECT_THAT(updated, HasSubstr("\nargs = []\n"));
  EXPECT_TRUE(CheckToml("c", updated).ok());

  Uninstall(McpClient::kCodex, McpScope::kGlobal);
  EXPECT_EQ(Read(paths_.codex_home / "config.toml"), original);
  EXPECT_EQ(Read(paths_.codex_home / "AGENTS.md"), agents);
}

TEST_F(McpInstallTest, CodexProjectWritesItsCodexDirAndAgentsMd) {
  McpReport report = Install(McpClient::kCodex, McpScope::kProject);
  EXPECT_THAT(Actions(report), ElementsAre("create", "create"));
  std::string config = Read(paths_.project / ".codex/config.toml");
  EXPECT_TRUE(CheckToml("c", config).ok());
  EXPECT_THAT(config, StartsWith("# Written by `abox mcp install codex`"));
  EXPECT_THAT(Read(paths_.project / "AGENTS.md"), StartsWith("<!-- abox:begin -->\n"));
  EXPECT_FALSE(fs::exists(paths_.codex_home)) << "the global config is not touched";
  Uninstall(McpClient::kCodex, McpScope::kProject);
  EXPECT_TRUE(fs::is_empty(paths_.project));
}

TEST_F(McpInstallTest, CursorProjectNextToAnotherServer) {
  const std::string original =
      "{\n  \"mcpServers\": {\n    \"linear\": {\n      \"url\": \"https://mcp.linear.app/sse\"\n"
      "    }\n  }\n}\n";
  Write(paths_.project / ".cursor/mcp.json", original);
  McpReport report = Install(McpClient::kCursor, McpScope::kProject);
  EXPECT_THAT(Actions(report), ElementsAre("update", "create"));
  json config = json::parse(Read(paths_.project / ".cursor/mcp.json"), nullptr, false);
  EXPECT_EQ(config["mcpServers"]["linear"]["url"], "https://mcp.linear.app/sse");
  EXPECT_EQ(config["mcpServers"]["abox"]["command"], server_.command);
  std::string rule = Read(paths_.project / ".cursor/rules/abox.mdc");
  EXPECT_THAT(rule, StartsWith("---\ndescription: "));
  EXPECT_THAT(rule, HasSubstr("\nalwaysApply: true\n---\n"));

  Uninstall(McpClient::kCursor, McpScope::kProject);
  EXPECT_EQ(Read(paths_.project / ".cursor/mcp.json"), original);
  EXPECT_FALSE(fs::exists(paths_.project / ".cursor/rules"));
  EXPECT_TRUE(fs::exists(paths_.project / ".cursor")) << "it was there before";
}

TEST_F(McpInstallTest, ASymlinkedConfigIsWrittenThroughToItsTarget) {
  // Dotfile managers link ~/.cursor/mcp.json to a file in their repository.
  const std::string original = "{\"mcpServers\": {\"x\": {\"command\": \"x\"}}}\n";
  Write(root_ / "dotfiles" / "mcp.json", original);
  fs::create_directories(paths_.home / ".cursor");
  fs::create_symlink(root_ / "dotfiles" / "mcp.json", paths_.home / ".cursor" / "mcp.json");
  Install(McpClient::kCursor, McpScope::kGlobal);
  EXPECT_TRUE(fs::is_symlink(paths_.home / ".cursor" / "mcp.json"));
  EXPECT_THAT(Read(root_ / "dotfiles" / "mcp.json"), HasSubstr("\"abox\""));
  Uninstall(McpClient::kCursor, McpScope::kGlobal);
  EXPECT_TRUE(fs::is_symlink(paths_.home / ".cursor" / "mcp.json"));
  EXPECT_EQ(Read(root_ / "dotfiles" / "mcp.json"), original);
}

TEST_F(McpInstallTest, CursorGlobalWritesOnlyTheConfig) {
  McpReport report = Install(McpClient::kCursor, McpScope::kGlobal);
  ASSERT_EQ(report.files.size(), 1u);
  EXPECT_EQ(report.files[0].path, (paths_.home / ".cursor/mcp.json").string());
  Uninstall(McpClient::kCursor, McpScope::kGlobal);
  EXPECT_TRUE(fs::is_empty(paths_.home));
}

TEST_F(McpInstallTest, MalformedOrForeignFilesAreRefusedAndNothingIsWritten) {
  Write(paths_.project / ".mcp.json", "{\n  \"mcpServers\": {\n    \"x\": 1,\n  }\n}\n");
  absl::StatusOr<McpReport> bad =
      InstallMcp(paths_, McpClient::kClaude, McpScope::kProject, server_, false, kNow);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr(".mcp.json is not valid JSON"));
  EXPECT_THAT(bad.status().message(), HasSubstr("line 4"));

  Write(paths_.project / ".cursor/mcp.json", "{\n  // servers\n  \"mcpServers\": {}\n}\n");
  absl::StatusOr<McpReport> comment =
      InstallMcp(paths_, McpClient::kCursor, McpScope::kProject, server_, false, kNow);
  ASSERT_FALSE(comment.ok());
  EXPECT_THAT(comment.status().message(), HasSubstr("has a comment at line 2"));

  Write(paths_.codex_home / "config.toml", "[mcp_servers.x\ncommand = 1\n");
  absl::StatusOr<McpReport> toml =
      InstallMcp(paths_, McpClient::kCodex, McpScope::kGlobal, server_, false, kNow);
  ASSERT_FALSE(toml.ok());
  EXPECT_THAT(toml.status().message(), HasSubstr("config.toml is not valid TOML (line 1"));

  // abox's table defined another way would make a duplicate: refused.
  Write(paths_.codex_home / "config.toml", "[mcp_servers]\nabox = { command = \"a\" }\n");
  EXPECT_FALSE(InstallMcp(paths_, McpClient::kCodex, McpScope::kGlobal, server_, false, kNow).ok());

  Write(paths_.project / ".mcp.json", "{}\n");
  Write(paths_.project / ".claude/skills/abox/SKILL.md", "my own skill\n");
  absl::StatusOr<McpReport> foreign =
      InstallMcp(paths_, McpClient::kClaude, McpScope::kProject, server_, false, kNow);
  ASSERT_FALSE(foreign.ok());
  EXPECT_THAT(foreign.status().message(), HasSubstr("SKILL.md exists and was not written by abox"));

  EXPECT_EQ(Read(paths_.project / ".mcp.json"), "{}\n");
  EXPECT_EQ(Read(paths_.project / ".claude/skills/abox/SKILL.md"), "my own skill\n");
  EXPECT_FALSE(fs::exists(paths_.abox_home)) << "no backup, no record";
  EXPECT_FALSE(fs::exists(paths_.codex_home / "AGENTS.md"));
}

TEST_F(McpInstallTest, DryRunWritesNothing) {
  McpReport report = Install(McpClient::kCodex, McpScope::kProject, /*dry_run=*/true);
  EXPECT_TRUE(report.dry_run);
  EXPECT_THAT(Actions(report), ElementsAre("create", "create"));
  EXPECT_THAT(report.files[0].diff, HasSubstr("@@ line 1\n"));
  EXPECT_THAT(report.files[0].diff, HasSubstr("\n+[mcp_servers.abox]\n"));
  EXPECT_THAT(report.files[1].diff, HasSubstr("\n+<!-- abox:begin -->\n"));
  EXPECT_TRUE(fs::is_empty(paths_.project));
  EXPECT_FALSE(fs::exists(paths_.abox_home));
}

TEST_F(McpInstallTest, KeysThePersonAddedToAbosEntryStay) {
  Write(paths_.project / ".mcp.json",
        "{\"mcpServers\": {\"abox\": {\"command\": \"/old\", \"args\": [], \"env\": {\"A\": "
        "\"1\"}, \"timeout\": 9}}}\n");
  Install(McpClient::kClaude, McpScope::kProject);
  json config = json::parse(Read(paths_.project / ".mcp.json"), nullptr, false);
  EXPECT_EQ(config["mcpServers"]["abox"], json({{"command", server_.command},
                                                {"args", {"--allow-apply"}},
                                                {"env", {{"A", "1"}}},
                                                {"timeout", 9}}));
}

TEST_F(McpInstallTest, CodexTableWrittenByHandIsReplacedInPlace) {
  const std::string before = "# mine\n[mcp_servers.abox]\ncommand = \"/old/abox-mcp\"\n";
  const std::string after = "\n[mcp_servers.zz]\ncommand = \"z\"\n";
  Write(paths_.codex_home / "config.toml", before + "[mcp_servers.abox.env]\nX = \"1\"\n" + after);
  Install(McpClient::kCodex, McpScope::kGlobal);
  std::string installed = Read(paths_.codex_home / "config.toml");
  EXPECT_THAT(installed, StartsWith("# mine\n# Written by `abox mcp install codex`"));
  EXPECT_THAT(installed, HasSubstr("tools.sandbox_restore.approval_mode = \"approve\"\n" + after));
  EXPECT_THAT(installed, Not(HasSubstr("/old/abox-mcp")));
  // Uninstall puts the person's own table back.
  Uninstall(McpClient::kCodex, McpScope::kGlobal);
  EXPECT_EQ(Read(paths_.codex_home / "config.toml"),
            before + "[mcp_servers.abox.env]\nX = \"1\"\n" + after);
}

TEST_F(McpInstallTest, StatusShowsEachClientAndScope) {
  Install(McpClient::kClaude, McpScope::kProject);
  server_.command = (root_ / "gone").string();
  Install(McpClient::kCodex, McpScope::kGlobal);
  Write(paths_.home / ".cursor/mcp.json", "{oops");
  std::vector<McpStatusRow> rows = McpStatus(paths_);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_TRUE(rows[0].installed);  // claude project
  EXPECT_EQ(rows[0].args, std::vector<std::string>{"--allow-apply"});
  EXPECT_TRUE(rows[0].command_executable);
  EXPECT_TRUE(rows[0].guidance_present);
  EXPECT_FALSE(rows[1].installed);  // claude global
  EXPECT_FALSE(rows[2].installed);  // codex project
  EXPECT_TRUE(rows[3].installed);   // codex global
  EXPECT_FALSE(rows[3].command_executable);
  EXPECT_TRUE(rows[3].guidance_present);
  EXPECT_THAT(rows[5].error, HasSubstr("not valid JSON"));  // cursor global
}

}  // namespace
}  // namespace abox::cli
