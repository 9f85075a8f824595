// The sandbox resource (/v1/sandboxes): the request body of POST /v1/sandboxes (SandboxCreate)
// and the Sandbox object every sandbox route answers with, each with its codec. The wire names
// of their fields are spelled here only. docs/openapi.yaml describes the same shapes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace abox::api {

// "workspace" of POST /v1/sandboxes: a host directory synced in as a copy.
struct WorkspaceSpec {
  std::string path;                       // host directory
  std::string guest_path = "/workspace";  // where the guest sees it
  std::vector<std::string> exclude;       // patterns added to the secret excludes
  std::vector<std::string> include;       // default exclude patterns taken out
  bool git_history = false;               // the full git history instead of a snapshot of HEAD

  friend bool operator==(const WorkspaceSpec&, const WorkspaceSpec&) = default;
};

// "egress" of POST /v1/sandboxes: the sandbox's own policy (rules checked by the daemon).
struct EgressSpec {
  std::optional<std::string> mode;  // none | allowlist | open; absent: the global mode
  std::vector<std::string> allow;   // rule texts

  friend bool operator==(const EgressSpec&, const EgressSpec&) = default;
};

// "setup" of POST /v1/sandboxes: commands run (as root, then as agent, in the workspace) before
// the sandbox is ready, with `allow` (rules or preset names) added to its policy only meanwhile.
struct SetupSpec {
  std::vector<std::string> commands;
  // Run as root (in the workspace) before `commands`: system setup without sudo (issue 19).
  std::vector<std::string> root_commands;
  std::vector<std::string> allow;
  int64_t timeout_seconds = 0;  // the whole setup phase; 0: the daemon's default (10 min)

  friend bool operator==(const SetupSpec&, const SetupSpec&) = default;
};

inline constexpr int64_t kDefaultMemoryMib = 2048;
inline constexpr int64_t kDefaultDiskMib = 16384;
inline constexpr int64_t kMinDiskMib = 1024;
inline constexpr int64_t kMaxDiskMib = int64_t{1} << 20;  // 1 TiB

// POST /v1/sandboxes.
struct SandboxCreate {
  std::string image = "default";
  std::string name;
  int64_t cpus = 1;
  // Enough for a compiler and a test run (issue 19). Counted in full by the capacity ledger.
  int64_t memory_mib = kDefaultMemoryMib;
  // The guest's disk: a sparse qcow2 overlay the host pays for only as the guest writes (the
  // sandbox's `disk_used_bytes`). At least the image's file system.
  int64_t disk_mib = kDefaultDiskMib;
  std::map<std::string, std::string> labels;
  int64_t ttl_seconds = 0;
  int64_t idle_timeout_seconds = 0;
  std::string accel = "auto";
  // Boot a kernel even when a golden snapshot of the image could be restored instead.
  bool cold = false;
  std::optional<WorkspaceSpec> workspace;
  std::optional<EgressSpec> egress;
  std::optional<SetupSpec> setup;
  // Secrets the sandbox gets (issue 15): secret name -> the environment variable that holds its
  // placeholder in every command (empty: the secret's name).
  std::map<std::string, std::string> secrets;
  // Git pushes it may make through the proxy: "HOST/OWNER/REPO:BRANCH-PATTERN" (the token is the
  // one secret in `secrets` bound to HOST, if any).
  std::vector<std::string> git_push;
  // Model APIs its agents may reach through aboxd's model broker ("anthropic", "openai"):
  // every command gets the broker's guest URL and a token of the sandbox's own (issue 16).
  std::vector<std::string> models;

  friend bool operator==(const SandboxCreate&, const SandboxCreate&) = default;
};
// The request body: only the fields that differ from the defaults above (which the decoder
// fills back in), so that a default request is "{}".
[[nodiscard]] nlohmann::json ToJson(const SandboxCreate& create);
// Parses and validates a request body (400 naming the field on any problem).
[[nodiscard]] absl::StatusOr<SandboxCreate> DecodeSandboxCreate(absl::string_view body);
// Sandbox names: [A-Za-z0-9][A-Za-z0-9_.-]{0,62}, and not 12 hex characters (that would be
// ambiguous with ids).
[[nodiscard]] absl::Status ValidateSandboxName(absl::string_view name);

// Extra, live facts about a sandbox that the daemon's table does not hold (the daemon fills
// them in; Sandbox carries them on the wire).
// What a sandbox lost to its own caps (refused names not queued; log rows and events pruned),
// shown only when something was.
struct SandboxDropped {
  int64_t queue = 0;
  int64_t connections = 0;
  int64_t dns = 0;
  int64_t events = 0;

  friend bool operator==(const SandboxDropped&, const SandboxDropped&) = default;
};

struct SandboxLive {
  int running_execs = 0;
  // The bound workspace ({"path","guest_path","last_sync_at","syncs"}), null when none.
  nlohmann::json workspace;
  // The egress mode its connections are decided by now ("none", "allowlist", "open"); empty
  // when unknown.
  std::string egress_mode;
  std::optional<SandboxDropped> dropped;
  std::map<std::string, std::string> secrets;  // secret name -> variable (never a value)
  std::vector<std::string> git_push;
  std::vector<std::string> models;
  int64_t disk_used_bytes = 0;  // its disk overlay's allocated bytes on the host
};

// A sandbox as the API shows it. Absent optional facts are empty / zero / nullopt.
struct Sandbox {
  std::string id;
  std::string name;
  std::string image;
  int64_t cpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_mib = 0;         // 0: the image's size (sandboxes from before disks had a size)
  int64_t disk_used_bytes = 0;  // what its disk holds on the host now; 0 when not running
  std::map<std::string, std::string> labels;
  std::string state;    // creating | ready | stopping | stopped | failed
  std::string failure;  // why it failed; empty otherwise
  std::optional<absl::Time> created_at;
  std::optional<absl::Time> ready_at;
  std::optional<absl::Time> last_active_at;
  std::optional<absl::Time> expires_at;  // when the TTL or idle timeout stops it
  int64_t ttl_seconds = 0;
  int64_t idle_timeout_seconds = 0;
  std::string accel;    // kvm | tcg; empty until booted
  int64_t vmm_pid = 0;  // 0: unknown
  int64_t running_execs = 0;
  // The Workspace object of docs/openapi.yaml as the workspace service describes it (or
  // {"error": ...}), passed through; null when none is bound.
  nlohmann::json workspace;
  std::string egress_mode;                // "egress": {"mode": ...}; empty when unknown
  std::optional<SandboxDropped> dropped;  // absent when it lost nothing
  // What it was given (abox create --secret / --git-push): names and variables only.
  std::map<std::string, std::string> secrets;
  std::vector<std::string> git_push;
  std::vector<std::string> models;  // the model APIs its agents may reach through the broker

  friend bool operator==(const Sandbox&, const Sandbox&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const Sandbox& sandbox);
// Tolerant of unknown fields; a known field of the wrong type is an error naming it.
[[nodiscard]] absl::StatusOr<Sandbox> DecodeSandbox(const nlohmann::json& value);

// GET /v1/sandboxes: {"sandboxes": [...]}.
[[nodiscard]] nlohmann::json SandboxListToJson(const std::vector<Sandbox>& sandboxes);
[[nodiscard]] absl::StatusOr<std::vector<Sandbox>> DecodeSandboxList(const nlohmann::json& value);

}  // namespace abox::api
