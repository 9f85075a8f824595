// abox's MCP tools: what each one offers a model (tools/list) and how it runs through aboxd's
// API. One file per group: tools_sandbox.cc, tools_exec.cc, tools_files.cc,
// tools_workspace.cc; shared helpers in tools_common.cc.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/client/api_client.h"
#include "src/mcp/daemon_connection.h"
#include "src/mcp/exec_sessions.h"
#include "src/mcp/server.h"

namespace abox::mcp {

// What the person allowed when they registered abox-mcp (its flags).
struct ToolOptions {
  bool allow_apply = false;           // apply_changes writes into the host directory
  bool allow_egress_changes = false;  // egress_request / create may widen the egress policy
  bool allow_remove_any = false;      // sandbox_remove may remove sandboxes others created
  // Secrets sandbox_create may give a sandbox (placeholders only: the values stay on the host).
  std::vector<std::string> allowed_secrets;
  std::string start_dir;  // abox-mcp's working directory: the default workspace
  std::string home_dir;   // $HOME: never a default workspace
};

// What the tools share. Thread-safe.
class ToolEnv final {
 public:
  ToolEnv(DaemonConnection& daemon, ExecSessions& sessions, ToolOptions options)
      : daemon_(daemon), sessions_(sessions), options_(std::move(options)) {}

  [[nodiscard]] DaemonConnection& daemon() { return daemon_; }
  [[nodiscard]] ExecSessions& sessions() { return sessions_; }
  [[nodiscard]] const ToolOptions& options() const { return options_; }

  // Sandboxes this process created (sandbox_remove's default scope).
  void AddOwned(const std::string& id);
  [[nodiscard]] bool Owns(const std::string& id);

 private:
  DaemonConnection& daemon_;
  ExecSessions& sessions_;
  ToolOptions options_;
  std::mutex mu_;
  std::set<std::string> owned_;  // guarded by mu_
};

// Every tool, in the order tools/list shows them.
[[nodiscard]] std::vector<Tool> AllTools(ToolEnv& env);
[[nodiscard]] std::vector<Tool> SandboxTools(ToolEnv& env);
[[nodiscard]] std::vector<Tool> SnapshotTools(ToolEnv& env);
[[nodiscard]] std::vector<Tool> ExecTools(ToolEnv& env);
[[nodiscard]] std::vector<Tool> FileTools(ToolEnv& env);
[[nodiscard]] std::vector<Tool> WorkspaceTools(ToolEnv& env);

// The initialize result's instructions: when a model should use the sandbox.
[[nodiscard]] std::string Instructions();

// {"readOnlyHint":..., "destructiveHint":..., "idempotentHint":..., "openWorldHint":...}.
// The output schema of a tool that answers with one sandbox.
[[nodiscard]] nlohmann::json SandboxSchema();
// The daemon's sandbox object in `r`, plus created_here (whether this abox-mcp created it).
[[nodiscard]] absl::StatusOr<nlohmann::json> SandboxJson(ToolEnv& env, const client::ApiResponse& r,
                                                         absl::string_view request);

// {"sandboxes": [...]}: the daemon's sandbox list in `r`, one summary each (id, name, image,
// state, size, workspace path, failure, created_here).
[[nodiscard]] absl::StatusOr<nlohmann::json> SandboxListJson(ToolEnv& env,
                                                             const client::ApiResponse& r,
                                                             absl::string_view request);

[[nodiscard]] nlohmann::json Annotations(bool read_only, bool destructive, bool idempotent,
                                         bool open_world);

// One API exchange with a client of its own, cancelled when the call is.
[[nodiscard]] absl::StatusOr<client::ApiResponse> ApiGet(ToolEnv& env, CallContext& ctx,
                                                         absl::string_view target);
[[nodiscard]] absl::StatusOr<client::ApiResponse> ApiPost(ToolEnv& env, CallContext& ctx,
                                                          absl::string_view target,
                                                          const nlohmann::json& body);
[[nodiscard]] absl::StatusOr<client::ApiResponse> ApiDelete(ToolEnv& env, CallContext& ctx,
                                                            absl::string_view target);

// The sandbox's full id from its id, name or prefix (GET /v1/sandboxes/{id}): the person's
// commands and the ownership check name it so.
[[nodiscard]] absl::StatusOr<std::string> SandboxId(ToolEnv& env, CallContext& ctx,
                                                    const std::string& asked);

// Sends progress once a second while it lives (for calls that wait on aboxd).
class ProgressTicker final {
 public:
  ProgressTicker(CallContext& ctx, std::string message);
  ~ProgressTicker();
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// A command run to its end for a tool (files, exec): its output, whole up to the session's
// buffer, and how it ended. Cancelling the call kills it.
struct Captured {
  std::string stdout_raw;  // the bytes, as written
  std::string stdout_text;
  std::string stderr_text;
  ExecState state;
  std::string sandbox_id;  // where it ran
};
[[nodiscard]] absl::StatusOr<Captured> RunCaptured(
    ToolEnv& env, CallContext& ctx, const std::string& sandbox, api::ExecCreate create,
    const std::string& stdin_bytes, absl::Duration timeout, absl::string_view progress_message);

// What the guest's OOM killer did during an ended command, in the CLI's words (api::OomSentence)
// with the advice a model can follow (sandbox_create's memory_mib); "" when it did nothing.
// `memory_mib`: the sandbox's, 0 when not known.
[[nodiscard]] std::string OomNote(const ExecState& state, int64_t memory_mib);

}  // namespace abox::mcp
