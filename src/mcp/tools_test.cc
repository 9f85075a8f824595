#include "src/mcp/tools.h"

#include <regex>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/mcp/errors.h"
#include "src/mcp/tool_args.h"

namespace abox::mcp {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// The tools over a daemon that does not run (and is not started): what they decide before
// asking aboxd, and their tools/list entries.
class ToolsTest : public testing::Test {
 protected:
  static client::DaemonOptions NoDaemon() {
    client::DaemonOptions o;
    o.socket_path = "/nonexistent/abox-mcp-test/aboxd.sock";
    o.autostart = false;
    return o;
  }
  const Tool& Find(const std::string& name) {
    for (const Tool& t : tools_) {
      if (t.name == name) {
        return t;
      }
    }
    ADD_FAILURE() << "no tool " << name;
    return tools_.front();
  }
  // The tool's result as tools/call would send it, arguments checked first like the server does.
  json Call(const std::string& name, const json& args) {
    const Tool& tool = Find(name);
    CallContext ctx(nullptr, nullptr);
    absl::Status valid = CheckArguments(tool.input_schema, args);
    return Server::CallResult(valid.ok() ? tool.run(args, ctx) : absl::StatusOr<json>(valid));
  }
  static std::string Text(const json& result) { return result["content"][0]["text"]; }

  DaemonConnection daemon_{NoDaemon()};
  ExecSessions sessions_{daemon_};
  ToolEnv env_{daemon_, sessions_, ToolOptions{.start_dir = "/tmp/project"}};
  std::vector<Tool> tools_ = AllTools(env_);
};

TEST_F(ToolsTest, OffersTheToolsOfTheIssue) {
  std::set<std::string> names;
  for (const Tool& t : tools_) {
    names.insert(t.name);
  }
  EXPECT_EQ(names,
            (std::set<std::string>{"sandbox_create",  "sandbox_list",       "sandbox_inspect",
                                   "sandbox_stop",    "sandbox_remove",     "exec",
                                   "exec_start",      "exec_read",          "exec_write_stdin",
                                   "exec_signal",     "exec_wait",          "read_file",
                                   "write_file",      "list_files",         "workspace_sync",
                                   "workspace_diff",  "egress_log",         "apply_changes",
                                   "egress_request",  "sandbox_checkpoint", "sandbox_checkpoints",
                                   "sandbox_restore", "sandbox_fork",       "sandbox_pause",
                                   "sandbox_resume"}));
  EXPECT_EQ(names.size(), tools_.size()) << "names are unique";
}

TEST_F(ToolsTest, EveryToolHasAWellFormedListEntry) {
  const std::regex name_pattern("[A-Za-z0-9_.-]{1,128}");
  for (const Tool& t : tools_) {
    SCOPED_TRACE(t.name);
    EXPECT_TRUE(std::regex_match(t.name, name_pattern));
    EXPECT_FALSE(t.title.empty());
    EXPECT_GT(t.description.size(), 40u) << "a description a model can act on";
    EXPECT_EQ(t.input_schema["type"], "object");
    EXPECT_EQ(t.input_schema["additionalProperties"], false);
    ASSERT_TRUE(t.input_schema["properties"].is_object());
    for (const auto& required : t.input_schema.value("required", json::array())) {
      EXPECT_TRUE(t.input_schema["properties"].contains(required.get<std::string>())) << required;
    }
    for (const auto& [key, prop] : t.input_schema["properties"].items()) {
      EXPECT_TRUE(prop.contains("type")) << key;
    }
    EXPECT_EQ(t.output_schema["type"], "object");
    for (const char* hint :
         {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}) {
      EXPECT_TRUE(t.annotations[hint].is_boolean()) << hint;
    }
    EXPECT_TRUE(t.run != nullptr);
  }
  EXPECT_EQ(Find("sandbox_list").annotations["readOnlyHint"], true);
  EXPECT_EQ(Find("sandbox_remove").annotations["destructiveHint"], true);
  EXPECT_EQ(Find("exec").input_schema["properties"]["timeout_seconds"]["maximum"], 50);
}

TEST_F(ToolsTest, WideningEgressAtCreateNeedsThePersonsFlag) {
  json r = Call("sandbox_create", {{"egress_mode", "open"}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_THAT(Text(r), HasSubstr("not_allowed"));
  EXPECT_THAT(Text(r), HasSubstr("--allow-egress-changes"));
  r = Call("sandbox_create", {{"egress_allow", {"pypi.org"}}});
  EXPECT_THAT(Text(r), HasSubstr("egress_request"));
}

TEST_F(ToolsTest, GivingASecretAtCreateNeedsThePersonsFlagForThatName) {
  json r = Call("sandbox_create", {{"secrets", {"GITHUB_TOKEN"}}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_THAT(Text(r), HasSubstr("not_allowed"));
  EXPECT_THAT(Text(r), HasSubstr("--allow-secret GITHUB_TOKEN"));
  r = Call("sandbox_create", {{"git_push", {"github.com/acme/app:agent/*"}}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_THAT(Text(r), HasSubstr("--allow-egress-changes"));
}

TEST_F(ToolsTest, SnapshotToolsCheckTheirArguments) {
  EXPECT_EQ(Find("sandbox_restore").annotations["destructiveHint"], true);
  EXPECT_EQ(Find("sandbox_checkpoints").annotations["readOnlyHint"], true);
  json r = Call("sandbox_restore", {{"sandbox", "s"}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_THAT(Text(r), HasSubstr("checkpoint"));
  r = Call("sandbox_fork", {{"sandbox", "s"}, {"count", 33}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_THAT(Text(r), HasSubstr("\"count\" must be at most 32"));
}

TEST_F(ToolsTest, ExecNeedsExactlyOneOfArgvAndShell) {
  for (const json& args :
       {json{{"sandbox", "s"}}, json{{"sandbox", "s"}, {"argv", {"true"}}, {"shell", "true"}},
        json{{"sandbox", "s"}, {"argv", json::array()}}}) {
    json r = Call("exec", args);
    EXPECT_EQ(r["isError"], true) << args.dump();
    EXPECT_THAT(Text(r), HasSubstr("exactly one of \"argv\"")) << args.dump();
  }
  json r = Call("exec", {{"sandbox", "s"}, {"shell", "sleep 100"}, {"timeout_seconds", 120}});
  EXPECT_THAT(Text(r), HasSubstr("\"timeout_seconds\" must be at most 50"));
}

TEST(OomNoteTest, SaysWhatTheOomKillerDidAndHowToGiveMoreMemory) {
  ExecState killed{.ended = true, .state = "exited", .signal = 9, .oom_kills = 1};
  EXPECT_EQ(OomNote(killed, 512),
            "the command was killed for lack of memory (the sandbox has 512 MiB; give a sandbox "
            "more with sandbox_create's memory_mib, e.g. 1024)");
  ExecState make{.ended = true, .state = "exited", .exit_code = 2, .oom_kills = 2};
  EXPECT_EQ(OomNote(make, 0),
            "the OOM killer ended 2 processes during this command (give a sandbox more with "
            "sandbox_create's memory_mib, e.g. 4096)");
  EXPECT_EQ(OomNote(ExecState{.ended = true, .state = "exited", .signal = 9}, 512), "");
}

TEST_F(ToolsTest, ExecResultsDeclareTheirOomFields) {
  for (const char* tool : {"exec", "exec_read", "exec_wait"}) {
    const json& props = Find(tool).output_schema["properties"];
    EXPECT_EQ(props["oom_kills"]["type"], "integer") << tool;
    EXPECT_EQ(props["oom"]["type"], "string") << tool;
  }
}

TEST_F(ToolsTest, UnknownHandlesAreNotFound) {
  for (const char* tool : {"exec_read", "exec_wait", "exec_signal", "exec_write_stdin"}) {
    json r = Call(tool, {{"handle", "e-123"}});
    EXPECT_EQ(r["isError"], true) << tool;
    EXPECT_THAT(Text(r), HasSubstr("not_found: no command \"e-123\" started by this abox-mcp"))
        << tool;
  }
}

TEST_F(ToolsTest, ADaemonThatIsNotRunningIsAnErrorThatSaysSo) {
  json r = Call("sandbox_list", json::object());
  EXPECT_EQ(r["isError"], true);
  EXPECT_THAT(Text(r), HasSubstr("abox daemon start"));
}

TEST_F(ToolsTest, InstructionsTellAModelWhenToUseTheSandbox) {
  EXPECT_THAT(Instructions(), HasSubstr("sandbox_create"));
  EXPECT_THAT(Instructions(), HasSubstr("exit code"));
}

}  // namespace
}  // namespace abox::mcp
