// The sandboxes table: one row per sandbox aboxd knows, from create until remove.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/store/column_codec.h"
#include "src/store/database.h"

namespace abox::store {

enum class SandboxState { kCreating, kReady, kStopping, kStopped, kFailed, kRemoved, kPaused };

// "creating", "ready", "stopping", "stopped", "failed", "removed", "paused".
[[nodiscard]] const char* SandboxStateName(SandboxState state);
// The inverse; kInvalidArgument for anything else.
[[nodiscard]] absl::StatusOr<SandboxState> ParseSandboxState(absl::string_view text);

struct SandboxRecord {
  std::string id;    // 12 lowercase hex characters
  std::string name;  // unique among sandboxes; empty: unnamed
  std::string image;
  int cpus = 1;
  int memory_mib = 512;
  int64_t disk_mib = 0;  // the VM's disk; 0: the image's rootfs size (sandboxes from before 8)
  StringMap labels;
  SandboxState state = SandboxState::kCreating;
  std::string failure;  // why it failed (state kFailed); empty otherwise
  std::string run_dir;
  absl::Time created_at;                     // set by Insert
  std::optional<absl::Time> ready_at;        // set when it first becomes ready
  int64_t ttl_seconds = 0;                   // 0: no TTL
  int64_t idle_timeout_seconds = 0;          // 0: no idle timeout
  std::optional<absl::Time> last_active_at;  // set on ready and by Touch
  int64_t vmm_pid = 0;                       // diagnostic only; 0: unknown
  std::string accel;                         // "kvm" / "tcg"; empty until booted

  friend bool operator==(const SandboxRecord&, const SandboxRecord&) = default;
};

struct SandboxFilter {
  // Every pair must be among the sandbox's labels.
  StringMap labels;
  // The sandbox's state must be one of these; empty: any.
  std::vector<SandboxState> states;
};

enum class ExpiryReason { kTtl, kIdle };

struct ExpiredSandbox {
  SandboxRecord sandbox;
  ExpiryReason reason;
};

// Typed access to the sandboxes table. Does not own the Database, which must outlive it.
// Times come from the injected clock.
//
// Thread safety: thread-safe; each method holds the database's connection for its duration.
class SandboxRepo final {
 public:
  explicit SandboxRepo(Database& db, Clock clock = absl::Now)
      : db_(&db), clock_(std::move(clock)) {}

  // Stores a new sandbox with created_at = now and returns it as stored. A malformed id is
  // kInvalidArgument; an id or name already in use is kAlreadyExists naming the holder.
  [[nodiscard]] absl::StatusOr<SandboxRecord> Insert(const SandboxRecord& sandbox);

  // The sandbox with exactly this id; kNotFound "no sandbox 'ID'".
  [[nodiscard]] absl::StatusOr<SandboxRecord> Get(absl::string_view id);

  // What a person means by `ref`: the sandbox with that exact id, else that exact name, else
  // the only one whose id starts with `ref` (3 or more characters). Several prefix matches are
  // kFailedPrecondition listing the candidates; none is kNotFound "no sandbox 'REF'".
  [[nodiscard]] absl::StatusOr<SandboxRecord> Resolve(absl::string_view ref);

  // Sandboxes matching `filter`, newest first.
  [[nodiscard]] absl::StatusOr<std::vector<SandboxRecord>> List(const SandboxFilter& filter);

  // Sets the state and failure text. A move to kReady sets last_active_at to now (and
  // ready_at, the first time). kNotFound for an unknown id.
  [[nodiscard]] absl::Status UpdateState(absl::string_view id, SandboxState state,
                                         absl::string_view failure = "");

  // UpdateState only if the sandbox is in `from` now (one compare-and-set in one statement):
  // kFailedPrecondition "sandbox ID is STATE, not FROM" when another transition came first,
  // kNotFound for an unknown id.
  [[nodiscard]] absl::Status TransitionState(absl::string_view id, SandboxState from,
                                             SandboxState to, absl::string_view failure = "");

  // Records the booted VM: VMM pid (diagnostic) and accelerator in use.
  [[nodiscard]] absl::Status SetVm(absl::string_view id, int64_t vmm_pid, absl::string_view accel);
  // The sandbox runs in another VM now (a checkpoint restore), whose run dir this is.
  [[nodiscard]] absl::Status SetRunDir(absl::string_view id, absl::string_view run_dir);

  // last_active_at = now (the idle timeout counts from here).
  [[nodiscard]] absl::Status Touch(absl::string_view id);

  // Removes the row and, by cascade, its execs and their output. kNotFound for an unknown id.
  [[nodiscard]] absl::Status Delete(absl::string_view id);

  // Sandboxes due to stop at `now`, oldest first: creating or ready ones past
  // created_at + ttl, and ready ones idle since last_active_at for idle_timeout. A sandbox
  // past both reports kTtl.
  [[nodiscard]] absl::StatusOr<std::vector<ExpiredSandbox>> Expired(absl::Time now);

 private:
  Database* db_;
  Clock clock_;
};

}  // namespace abox::store
