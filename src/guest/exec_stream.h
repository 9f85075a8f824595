// One exec stream: a running command and the flow-controlled movement of its stdin, stdout and
// stderr over the channel, its timeout and its final kExit.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/base/child_process.h"
#include "src/guest/exec.h"
#include "src/guest/exec_cgroup.h"
#include "src/proto/frame.h"
#include "src/proto/messages.h"

namespace abox::guest {

using Clock = std::chrono::steady_clock;

// Where a stream's frames go (the channel's queue).
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  virtual void Send(proto::FrameType type, uint32_t stream, uint8_t flags,
                    absl::string_view payload) = 0;
};

// After the main process exits, output from background processes that still hold the pipes
// is forwarded for this long; then the pipes are closed and the stream ends.
inline constexpr std::chrono::milliseconds kDrainGrace{200};

// Owns the process (until reaped), its pipes or PTY and the two credit windows of the stream:
//  - guest->host: stdout and stderr share `send_`; a pipe is read only while the window and
//    the channel have room, so a chatty command blocks on its pipe instead of growing memory;
//  - host->guest: `recv_` bounds buffered stdin; credit goes back as bytes enter the pipe.
// Everything the host sends is validated; a violation is returned as an error status.
// Not thread-safe.
class ExecStream final {
 public:
  // Poll slots of a stream, see PollFor / OnPollReady.
  enum Slot { kStdoutSlot = 0, kStderrSlot = 1, kStdinSlot = 2, kProcessSlot = 3, kSlots = 4 };

  // `cgroup`: the one the process joined (kill_leftovers in a VM), else null.
  ExecStream(uint32_t id, SpawnedProcess process, const proto::ExecRequest& request,
             uint32_t send_window, uint32_t max_payload,
             std::unique_ptr<ExecCgroup> cgroup = nullptr);
  ExecStream(const ExecStream&) = delete;
  ExecStream& operator=(const ExecStream&) = delete;
  ~ExecStream();

  [[nodiscard]] uint32_t id() const { return id_; }
  [[nodiscard]] pid_t pid() const { return pid_; }
  // kExit was sent: nothing more will be sent and the stream can be dropped.
  [[nodiscard]] bool done() const { return exit_sent_; }

  // What to poll for a slot (fd -1: nothing). `may_send`: the channel has room for output.
  [[nodiscard]] pollfd PollFor(int slot, bool may_send) const;
  // Handles poll results for a slot. `scratch` has room for kMaxPayload bytes.
  void OnPollReady(int slot, short revents, char* scratch, FrameSink& sink, Clock::time_point now);
  // The earliest time OnTimer must run (timeout, end of the drain grace).
  [[nodiscard]] std::optional<Clock::time_point> NextDeadline() const;
  void OnTimer(Clock::time_point now, FrameSink& sink);
  // The main process was reaped by someone else (PID 1's waitpid(-1) loop).
  void OnReaped(const base::ExitStatus& status, Clock::time_point now, FrameSink& sink);

  // Frames from the host. Errors are protocol violations.
  [[nodiscard]] absl::Status OnStdin(absl::string_view data, bool eof, FrameSink& sink);
  [[nodiscard]] absl::Status OnCredit(uint32_t bytes);
  void OnSignal(int signal);
  void OnResize(const proto::PtySize& size);

  // Ends the stream without a kExit (host reset, session reset): SIGKILLs the process group and
  // closes everything. Returns the pidfd of the main process if it still has to be reaped.
  base::UniqueFd Abort();

 private:
  struct Output {
    base::UniqueFd fd;
    proto::FrameType type;
    // Bytes that were already in the pipe when the main process was reaped: they are
    // delivered however long credit takes; only later output is subject to the grace.
    size_t must_drain = 0;
    bool eof_sent = false;
  };

  void ReadOutput(Output& out, char* scratch, FrameSink& sink);
  void CloseOutput(Output& out, FrameSink& sink);
  void WriteStdin(FrameSink& sink);
  void CloseStdin();
  void Reaped(const base::ExitStatus& status, Clock::time_point now);
  // SIGKILLs the process group and, with a cgroup, everything in it.
  void KillAll();
  void MaybeFinish(Clock::time_point now, FrameSink& sink);

  const uint32_t id_;
  const pid_t pid_;
  const uint32_t max_payload_;
  const bool stdin_open_;
  const bool pty_;
  const bool kill_leftovers_;
  std::unique_ptr<ExecCgroup> cgroup_;
  base::UniqueFd pidfd_;
  Output outputs_[2];
  base::UniqueFd stdin_fd_;
  base::UniqueFd pty_master_;
  proto::CreditWindow send_;
  proto::CreditWindow recv_;
  std::string stdin_buf_;  // received from the host, not yet in the pipe (<= window)
  size_t stdin_off_ = 0;
  bool stdin_eof_ = false;  // the host closed stdin
  Clock::time_point started_;
  std::optional<Clock::time_point> timeout_at_;
  bool timed_out_ = false;
  std::optional<base::ExitStatus> status_;
  Clock::time_point ended_;
  Clock::time_point grace_end_;
  bool grace_expired_ = false;
  std::string error_;                               // why the command could not start
  const std::string oom_counter_path_;              // empty: OOM kills are not counted
  const std::optional<uint64_t> oom_kill_counter_;  // at the start
  bool exit_sent_ = false;
};

}  // namespace abox::guest
