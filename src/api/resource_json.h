// JSON for the API's resources (sandboxes, execs, output, events): what aboxd sends and the
// strict decoding of what clients send. No I/O. docs/openapi.yaml describes the same shapes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/store/event_repo.h"
#include "src/store/exec_repo.h"
#include "src/store/sandbox_repo.h"

namespace abox::api {

// RFC 3339 in UTC with milliseconds: "2026-11-30T16:05:31.123Z".
[[nodiscard]] std::string FormatApiTime(absl::Time time);

// POST /v1/sandboxes.
// "workspace" of POST /v1/sandboxes: a host directory synced in as a copy.
struct WorkspaceSpec {
  std::string path;                       // host directory
  std::string guest_path = "/workspace";  // where the guest sees it
  std::vector<std::string> exclude;       // patterns added to the secret excludes
  std::vector<std::string> include;       // default exclude patterns taken out
  bool git_history = false;               // the full git history instead of a snapshot of HEAD
};

// "egress" of POST /v1/sandboxes: the sandbox's own policy (rules checked by the daemon).
struct EgressSpec {
  std::optional<std::string> mode;  // none | allowlist | open; absent: the global mode
  std::vector<std::string> allow;   // rule texts
};

// "setup" of POST /v1/sandboxes: commands run (as agent, in the workspace) before the sandbox
// is ready, with `allow` (rules or preset names) added to its policy only meanwhile.
struct SetupSpec {
  std::vector<std::string> commands;
  std::vector<std::string> allow;
  int64_t timeout_seconds = 0;  // the whole setup phase; 0: the daemon's default (10 min)
};

struct SandboxCreate {
  std::string image = "default";
  std::string name;
  int64_t cpus = 1;
  int64_t memory_mib = 512;
  std::map<std::string, std::string> labels;
  int64_t ttl_seconds = 0;
  int64_t idle_timeout_seconds = 0;
  std::string accel = "auto";
  std::optional<WorkspaceSpec> workspace;
  std::optional<EgressSpec> egress;
  std::optional<SetupSpec> setup;
};
// Parses and validates a request body (400 naming the field on any problem).
[[nodiscard]] absl::StatusOr<SandboxCreate> DecodeSandboxCreate(absl::string_view body);
// Sandbox names: [A-Za-z0-9][A-Za-z0-9_.-]{0,62}, and not 12 hex characters (that would be
// ambiguous with ids).
[[nodiscard]] absl::Status ValidateSandboxName(absl::string_view name);

// Extra, live facts about a sandbox that the table does not hold.
struct SandboxLive {
  int running_execs = 0;
  // The bound workspace ({"path","guest_path","last_sync_at","syncs"}), null when none.
  nlohmann::json workspace;
  // The egress mode its connections are decided by now ("none", "allowlist", "open"); empty
  // when unknown.
  std::string egress_mode;
};
[[nodiscard]] nlohmann::json SandboxToJson(const store::SandboxRecord& sandbox,
                                           const SandboxLive& live = {});

// POST /v1/sandboxes/{id}/execs.
struct ExecCreate {
  std::vector<std::string> argv;
  std::string shell;
  std::map<std::string, std::string> env;
  std::string cwd;
  std::string user = "agent";
  int64_t timeout_ms = 0;
  bool stdin_open = false;                         // "stdin"
  std::optional<std::pair<int64_t, int64_t>> pty;  // rows, cols
  bool kill_on_disconnect = false;
  bool sync = true;  // sync the bound workspace in first (no-op without one)
};
[[nodiscard]] absl::StatusOr<ExecCreate> DecodeExecCreate(absl::string_view body);

// {"rows": R, "cols": C} (POST .../resize).
[[nodiscard]] absl::StatusOr<std::pair<int64_t, int64_t>> DecodePtySize(absl::string_view body);
// {"signal": 15 | "TERM" | "SIGTERM"} (POST .../signal): the signal number.
[[nodiscard]] absl::StatusOr<int> DecodeSignalRequest(absl::string_view body);
// "TERM" / "SIGTERM" / "15" → 15; kInvalidArgument otherwise.
[[nodiscard]] absl::StatusOr<int> ParseSignal(absl::string_view text);

[[nodiscard]] nlohmann::json ExecToJson(const store::ExecRecord& exec);
// The exec with its kept output under "output".
[[nodiscard]] nlohmann::json ExecToJson(const store::ExecWithOutput& exec);

// One piece of output: {"seq", "stream", "data"} for valid UTF-8, else "data_b64".
[[nodiscard]] nlohmann::json OutputChunkToJson(int64_t seq, store::ExecStream stream,
                                               absl::string_view data);
// The same with "type": "output" (a line of the output stream).
[[nodiscard]] nlohmann::json OutputEventJson(int64_t seq, store::ExecStream stream,
                                             absl::string_view data);

[[nodiscard]] nlohmann::json EventToJson(const store::Event& event);

// Serialises for the wire; invalid UTF-8 (which should not be there) is replaced, never thrown.
[[nodiscard]] std::string Dump(const nlohmann::json& value);

}  // namespace abox::api
