// The snapshot verbs through abox-mcp with real VMs (issue 13): an agent checkpoints a sandbox,
// breaks it, restores it; forks it; pauses and resumes a fork. abox-mcp is driven over stdio
// with JSON-RPC lines, the way an MCP client talks to it.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/cli_home_test.h"

namespace abox::testing {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

// abox-mcp on pipes, one JSON-RPC message a line.
class McpClient {
 public:
  absl::Status Start(const std::map<std::string, std::string>& env) {
    int in[2];
    int out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      return absl::InternalError("pipe");
    }
    to_server_ = base::UniqueFd(in[1]);
    from_server_ = base::UniqueFd(out[0]);
    base::SpawnOptions o;
    o.argv = {(std::filesystem::path(AboxBin()).parent_path() / "abox-mcp").string()};
    std::vector<std::string> environment = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
    for (const auto& [k, v] : env) {
      environment.push_back(absl::StrCat(k, "=", v));
    }
    if (const char* home = std::getenv("HOME")) {  // NOLINT(concurrency-mt-unsafe)
      environment.push_back(absl::StrCat("HOME=", home));
    }
    o.env = environment;
    o.stdin_fd = in[0];
    o.stdout_fd = out[1];
    o.stderr_fd = STDERR_FILENO;
    o.cwd = "/";
    absl::StatusOr<base::ChildProcess> child = base::ChildProcess::Spawn(o);
    ::close(in[0]);
    ::close(out[1]);
    if (!child.ok()) {
      return child.status();
    }
    child_ = *std::move(child);
    json init = Request("initialize", {{"protocolVersion", "2025-06-18"},
                                       {"capabilities", json::object()},
                                       {"clientInfo", {{"name", "e2e"}, {"version", "1"}}}});
    if (!init.contains("result")) {
      return absl::InternalError(absl::StrCat("initialize: ", init.dump()));
    }
    Send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    return absl::OkStatus();
  }

  // tools/call NAME ARGS: the result (structuredContent, isError, content).
  json Call(const std::string& name, const json& args) {
    json r = Request("tools/call", {{"name", name}, {"arguments", args}});
    return r.value("result", json::object());
  }

 private:
  void Send(const json& message) {
    std::string line = message.dump() + "\n";
    EXPECT_TRUE(base::WriteAll(to_server_.get(), line).ok());
  }

  // Sends a request and reads lines until its answer (notifications in between are skipped).
  json Request(const std::string& method, const json& params) {
    int id = ++next_id_;
    Send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}});
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    while (std::chrono::steady_clock::now() < deadline) {
      size_t nl = buffer_.find('\n');
      if (nl == std::string::npos) {
        pollfd p{from_server_.get(), POLLIN, 0};
        if (::poll(&p, 1, 1000) <= 0) {
          continue;
        }
        char chunk[65536];
        ssize_t n = ::read(from_server_.get(), chunk, sizeof(chunk));
        if (n <= 0) {
          ADD_FAILURE() << "abox-mcp closed its stdout";
          return json::object();
        }
        buffer_.append(chunk, static_cast<size_t>(n));
        continue;
      }
      json message = json::parse(buffer_.substr(0, nl), nullptr, false);
      buffer_.erase(0, nl + 1);
      if (message.is_object() && message.value("id", -1) == id) {
        return message;
      }
    }
    ADD_FAILURE() << "no answer to " << method;
    return json::object();
  }

  base::UniqueFd to_server_;
  base::UniqueFd from_server_;
  std::optional<base::ChildProcess> child_;
  std::string buffer_;
  int next_id_ = 0;
};

class McpSnapshotTest : public CliHomeTest {
 protected:
  // `shell` in `sandbox` through the exec tool: its stdout (a failed call is reported).
  std::string Exec(McpClient& mcp, const std::string& sandbox, const std::string& shell) {
    json r = mcp.Call("exec", {{"sandbox", sandbox}, {"shell", shell}});
    EXPECT_FALSE(r.value("isError", true)) << r.dump();
    return r["structuredContent"].value("stdout", "");
  }
};

TEST_F(McpSnapshotTest, AnAgentCheckpointsRestoresForksPausesAndResumes) {
  McpClient mcp;
  ASSERT_TRUE(mcp.Start(home_.Env()).ok());
  json created = mcp.Call("sandbox_create", {{"workspace", false}, {"memory_mib", 512}});
  ASSERT_FALSE(created.value("isError", true)) << created.dump();
  const std::string id = created["structuredContent"].value("id", "");
  ASSERT_FALSE(id.empty());

  Exec(mcp, id, "echo one > /tmp/f");
  json checkpoint = mcp.Call("sandbox_checkpoint", {{"sandbox", id}, {"name", "before"}});
  ASSERT_FALSE(checkpoint.value("isError", true)) << checkpoint.dump();
  EXPECT_EQ(checkpoint["structuredContent"].value("name", ""), "before");
  json listed = mcp.Call("sandbox_checkpoints", {{"sandbox", id}});
  ASSERT_EQ(listed["structuredContent"]["checkpoints"].size(), 1u) << listed.dump();

  // The risky step goes wrong; the agent restores.
  Exec(mcp, id, "echo two > /tmp/f; echo broken > /tmp/g");
  json restored = mcp.Call("sandbox_restore", {{"sandbox", id}, {"checkpoint", "before"}});
  ASSERT_FALSE(restored.value("isError", true)) << restored.dump();
  EXPECT_EQ(Exec(mcp, id, "cat /tmp/f; ls /tmp/g 2>/dev/null || echo no-g"), "one\nno-g\n");
  json unknown = mcp.Call("sandbox_restore", {{"sandbox", id}, {"checkpoint", "nope"}});
  EXPECT_TRUE(unknown.value("isError", false));
  EXPECT_THAT(unknown.dump(), HasSubstr("nope"));

  // Two forks, each its own from then on; this session made them.
  json forked = mcp.Call("sandbox_fork", {{"sandbox", id}, {"count", 2}});
  ASSERT_FALSE(forked.value("isError", true)) << forked.dump();
  json forks = forked["structuredContent"]["sandboxes"];
  ASSERT_EQ(forks.size(), 2u);
  std::string a = forks[0].value("id", "");
  std::string b = forks[1].value("id", "");
  Exec(mcp, a, "echo a > /tmp/f");
  EXPECT_EQ(Exec(mcp, b, "cat /tmp/f"), "one\n");

  // A fork paused to disk and resumed keeps its file.
  json paused = mcp.Call("sandbox_pause", {{"sandbox", a}});
  ASSERT_FALSE(paused.value("isError", true)) << paused.dump();
  EXPECT_EQ(paused["structuredContent"].value("state", ""), "paused");
  json resumed = mcp.Call("sandbox_resume", {{"sandbox", a}});
  ASSERT_FALSE(resumed.value("isError", true)) << resumed.dump();
  EXPECT_EQ(Exec(mcp, a, "cat /tmp/f"), "a\n");

  for (const std::string& s : {a, b, id}) {
    json removed = mcp.Call("sandbox_remove", {{"sandbox", s}});
    EXPECT_FALSE(removed.value("isError", true)) << removed.dump();
  }
}

// A sandbox the person made is theirs to roll back: the agent's restore is refused.
TEST_F(McpSnapshotTest, ARestoreOfThePersonsSandboxIsRefused) {
  std::string mine = Create();
  ASSERT_FALSE(mine.empty());
  McpClient mcp;
  ASSERT_TRUE(mcp.Start(home_.Env()).ok());
  json checkpoint = mcp.Call("sandbox_checkpoint", {{"sandbox", mine}, {"name", "cp"}});
  ASSERT_FALSE(checkpoint.value("isError", true)) << checkpoint.dump();
  json restored = mcp.Call("sandbox_restore", {{"sandbox", mine}, {"checkpoint", "cp"}});
  EXPECT_TRUE(restored.value("isError", false));
  EXPECT_THAT(restored.dump(), HasSubstr("only the person may restore"));
}

}  // namespace
}  // namespace abox::testing
