// The execs table and each exec's bounded output log.
#pragma once

#include <atomic>
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

enum class ExecState { kRunning, kExited, kFailed, kInterrupted };
enum class ExecStream { kStdout, kStderr };

// "running", "exited", "failed", "interrupted".
[[nodiscard]] const char* ExecStateName(ExecState state);
[[nodiscard]] absl::StatusOr<ExecState> ParseExecState(absl::string_view text);
// "stdout", "stderr".
[[nodiscard]] const char* ExecStreamName(ExecStream stream);
[[nodiscard]] absl::StatusOr<ExecStream> ParseExecStream(absl::string_view text);

// How an exec ended.
struct ExecResult {
  ExecState state = ExecState::kExited;  // never kRunning
  std::optional<int> exit_code;          // set when the process exited
  std::optional<int> signal;             // set when a signal killed it
  bool timed_out = false;
  std::string error;  // why it failed or was interrupted; empty otherwise
  // Processes the guest's OOM killer ended while it ran (VM-wide: docs/protocol.md), >= 0.
  int64_t oom_kills = 0;

  friend bool operator==(const ExecResult&, const ExecResult&) = default;
};

struct ExecRecord {
  std::string id;
  std::string sandbox_id;
  std::vector<std::string> argv;  // either argv ...
  std::string shell;              // ... or a shell command line
  StringMap env;
  std::string cwd;
  std::string user;
  bool pty = false;
  int64_t timeout_ms = 0;  // 0: none
  ExecState state = ExecState::kRunning;
  ExecResult result;                      // meaningful once state != kRunning
  absl::Time started_at;                  // set by Insert
  std::optional<absl::Time> finished_at;  // set by Finish / MarkRunningAsInterrupted
  int64_t output_bytes = 0;               // bytes of output kept
  bool output_truncated = false;          // older output was dropped to respect the cap

  friend bool operator==(const ExecRecord&, const ExecRecord&) = default;
};

struct OutputChunk {
  int64_t seq = 0;  // 1, 2, ... in the order appended
  ExecStream stream = ExecStream::kStdout;
  std::string data;

  friend bool operator==(const OutputChunk&, const OutputChunk&) = default;
};

// Output for AppendBatch: one chunk of one stream.
struct OutputPiece {
  ExecStream stream = ExecStream::kStdout;
  std::string data;
};

struct ExecWithOutput {
  ExecRecord exec;
  std::vector<OutputChunk> output;  // oldest first
};

struct ExecRepoOptions {
  // Output bytes kept per exec (stdout and stderr together). Beyond it the oldest chunks are
  // dropped and the exec is marked output_truncated. Values below 1 count as 1.
  int64_t output_cap_bytes = 1 << 20;
};

// Typed access to the execs and exec_output tables. Does not own the Database, which must
// outlive it. Times come from the injected clock.
//
// Thread safety: thread-safe; each method holds the database's connection for its duration.
class ExecRepo final {
 public:
  explicit ExecRepo(Database& db, Clock clock = absl::Now, ExecRepoOptions options = {});

  // Stores a new exec as running with started_at = now and no output; returns it as stored.
  // Exactly one of argv and shell must be given (kInvalidArgument otherwise); an unknown
  // sandbox is kNotFound; a used id kAlreadyExists.
  [[nodiscard]] absl::StatusOr<ExecRecord> Insert(const ExecRecord& exec);

  // Adds output, dropping the oldest chunks beyond the cap (a single chunk larger than the cap
  // keeps only its last cap bytes). Empty data is a no-op. kNotFound for an unknown exec.
  [[nodiscard]] absl::Status Append(absl::string_view exec_id, ExecStream stream,
                                    absl::string_view data);
  // Append() of each piece in order, in one transaction (a command's output is written in
  // batches, not a transaction per frame of the guest's). All or nothing.
  [[nodiscard]] absl::Status AppendBatch(absl::string_view exec_id,
                                         const std::vector<OutputPiece>& pieces);
  // Transactions Append / AppendBatch have committed, for tests and diagnostics.
  [[nodiscard]] uint64_t output_transactions() const { return output_transactions_.load(); }

  // Records how a running exec ended, with finished_at = now. `result.state` must not be
  // kRunning (kInvalidArgument); an exec that already ended is kFailedPrecondition.
  [[nodiscard]] absl::Status Finish(absl::string_view exec_id, const ExecResult& result);

  // The exec, without output; kNotFound "no exec 'ID'".
  [[nodiscard]] absl::StatusOr<ExecRecord> Get(absl::string_view exec_id);
  // The exec and its kept output.
  [[nodiscard]] absl::StatusOr<ExecWithOutput> GetWithOutput(absl::string_view exec_id);

  // A sandbox's execs, newest first, at most `limit` (>= 1), without output. An unknown sandbox
  // has none.
  [[nodiscard]] absl::StatusOr<std::vector<ExecRecord>> ListBySandbox(absl::string_view sandbox_id,
                                                                      int limit);

  // For a daemon restart or a dead VM: every exec of `sandbox_id` still marked running becomes
  // kInterrupted with `reason` as its error and finished_at = now. Returns how many changed.
  [[nodiscard]] absl::StatusOr<int64_t> MarkRunningAsInterrupted(absl::string_view sandbox_id,
                                                                 absl::string_view reason);
  // The same for every sandbox.
  [[nodiscard]] absl::StatusOr<int64_t> MarkAllRunningAsInterrupted(absl::string_view reason);

 private:
  absl::StatusOr<int64_t> MarkInterrupted(std::optional<absl::string_view> sandbox_id,
                                          absl::string_view reason);
  // One piece of output inside the caller's transaction.
  absl::Status AppendIn(Connection& connection, absl::string_view exec_id, ExecStream stream,
                        absl::string_view data);

  Database* db_;
  Clock clock_;
  ExecRepoOptions options_;
  std::atomic<uint64_t> output_transactions_{0};
};

}  // namespace abox::store
