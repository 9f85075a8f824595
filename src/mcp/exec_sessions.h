// The commands this abox-mcp started in sandboxes. Each has a reader thread that follows its
// output stream (GET .../output) into a bounded buffer from the moment it starts: the exec is
// started with kill_on_disconnect, so the command lives only while this process reads it, and
// abox-mcp's exit (or Detach) kills it in the guest. Output is addressed by a cursor: the byte
// offset in the command's combined stdout + stderr.
//
// Thread safety: everything here may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/api/exec.h"
#include "src/client/api_client.h"
#include "src/mcp/daemon_connection.h"

namespace abox::mcp {

// Output since a cursor.
struct ExecRead {
  std::string stdout_text;  // UTF-8 (invalid bytes replaced)
  std::string stderr_text;
  int64_t next_cursor = 0;
  int64_t dropped_bytes = 0;  // output between the cursor and the oldest byte still kept
  bool more = false;          // more output is already there past next_cursor
};

// Where a command is.
struct ExecState {
  bool ended = false;
  std::string state;  // running | exited | failed | interrupted | lost
  std::optional<int64_t> exit_code;
  std::optional<int64_t> signal;
  bool timed_out = false;
  std::string error;
  int64_t oom_kills = 0;     // processes the guest's OOM killer ended while it ran
  int64_t stdout_bytes = 0;  // produced so far
  int64_t stderr_bytes = 0;
  int64_t duration_ms = 0;
};

class ExecSession final {
 public:
  // Bytes of output kept per command (older output is dropped first).
  static constexpr size_t kKeptBytes = size_t{2} << 20;

  ExecSession(std::string sandbox_id, std::string exec_id,
              std::unique_ptr<client::ApiClient> reader);
  ExecSession(const ExecSession&) = delete;
  ExecSession& operator=(const ExecSession&) = delete;
  // Stops reading (which kills a command still running) and joins the reader.
  ~ExecSession();

  [[nodiscard]] const std::string& id() const { return exec_id_; }
  [[nodiscard]] const std::string& sandbox_id() const { return sandbox_id_; }

  // Output after `cursor`, at most about `max_bytes` of it.
  [[nodiscard]] ExecRead Read(int64_t cursor, size_t max_bytes);
  // The kept output of one stream, whole (UTF-8, invalid bytes replaced).
  [[nodiscard]] std::string Output(bool stderr_stream);
  // The same as bytes, as the command wrote them.
  [[nodiscard]] std::string OutputBytes(bool stderr_stream);
  [[nodiscard]] ExecState State();
  // Waits until the command ended, `timeout` passed or Interrupt(); true when it ended.
  [[nodiscard]] bool WaitFor(absl::Duration timeout);
  // Waits until there is output past `cursor`, the command ended, `timeout` passed or
  // Interrupt().
  void WaitForOutput(int64_t cursor, absl::Duration timeout);
  // Wakes every WaitFor().
  void Interrupt();
  // Stops following the output: aboxd kills the command when its last reader leaves.
  void Detach();

  // What the reader thread records (public for tests): output as it arrives, and the end, with
  // the ended exec or why the stream ended without it.
  void Append(bool stderr_stream, std::string data);
  void Finish(std::optional<api::Exec> exec, std::string error);

 private:
  friend class ExecSessions;
  struct Piece {
    int64_t offset;
    bool stderr_stream;
    std::string data;
  };
  void StartReader(std::string exec_path);

  std::string sandbox_id_;
  std::string exec_id_;
  std::unique_ptr<client::ApiClient> reader_;
  std::thread thread_;
  absl::Time started_ = absl::Now();

  std::mutex mu_;  // guards the members below
  std::condition_variable cv_;
  std::deque<Piece> pieces_;
  size_t kept_ = 0;
  int64_t total_ = 0;
  int64_t stdout_bytes_ = 0;
  int64_t stderr_bytes_ = 0;
  bool ended_ = false;
  bool interrupted_ = false;
  std::optional<api::Exec> result_;
  std::string lost_;  // why the stream ended without the command's result
  absl::Time finished_ = absl::InfinitePast();
};

class ExecSessions final {
 public:
  // Commands remembered at most; beyond, the oldest ended ones are forgotten.
  static constexpr size_t kMaxSessions = 64;

  explicit ExecSessions(DaemonConnection& daemon) : daemon_(daemon) {}
  ExecSessions(const ExecSessions&) = delete;
  ExecSessions& operator=(const ExecSessions&) = delete;
  ~ExecSessions() { KillAll(); }

  // Starts `create` in `sandbox` (kill_on_disconnect is forced on) and follows its output.
  // `stdin_bytes` is written to its stdin; with `close_stdin` stdin is closed after them.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<ExecSession>> Start(const std::string& sandbox,
                                                                   api::ExecCreate create,
                                                                   const std::string& stdin_bytes,
                                                                   bool close_stdin);
  // A command this process started; kNotFound otherwise.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<ExecSession>> Find(const std::string& exec_id);
  // POST .../signal; a command that already ended is not an error.
  [[nodiscard]] absl::Status Signal(const ExecSession& session, const std::string& signal);
  // POST .../stdin (with eof: closes it after the bytes).
  [[nodiscard]] absl::Status WriteStdin(const ExecSession& session, const std::string& bytes,
                                        bool eof);
  // Kills every command still running (SIGKILL, then leaves its stream). For exit.
  void KillAll();

 private:
  DaemonConnection& daemon_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<ExecSession>> sessions_;  // guarded by mu_
  std::deque<std::string> order_;                                 // guarded by mu_
};

}  // namespace abox::mcp
