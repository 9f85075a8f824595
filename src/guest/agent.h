// The agent: the session with the host over one channel (handshake, ping, exec streams, tunnel
// streams, shutdown), run as a single-threaded poll loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/guest/channel.h"
#include "src/guest/exec_stream.h"
#include "src/guest/tunnel_hub.h"
#include "src/proto/frame.h"

namespace abox::guest {

// Guest side of the protocol. The host is trusted but every byte it sends is still validated:
// a malformed frame, a frame on a stream that was never opened, data beyond the window or an
// invalid grant is a protocol violation, answered with kGoodbye and a reset of the session
// (every running command is killed). Memory is bounded: one partial frame, stdin within the
// window per stream, at most kMaxStreams streams, output read only while the channel queue is
// below kMaxQueuedOutput, and the channel is not read while unsent control frames (pongs,
// credits) exceed kMaxQueuedControl. Not thread-safe; Run() owns the calling thread.
class Agent final : private FrameSink {
 public:
  struct Options {
    // We are init: reap every child with waitpid(-1) when `signal_fd` reports SIGCHLD.
    bool pid1 = false;
    // A signalfd for SIGCHLD (PID 1) and the termination signals, or -1. Owned by the caller.
    int signal_fd = -1;
    // Run commands as the requested user (the agent is root). Otherwise they run as we do.
    bool switch_user = false;
    // Egress: local connections and DNS queries carried as tunnel streams. Owned by the caller,
    // used only on Run()'s thread. Null: no egress (tunnel frames from the host are violations).
    TunnelHub* egress = nullptr;
    // The /proc/vmstat whose OOM kill counter is read at each command's start and end, to tell
    // the host how many processes the OOM killer ended meanwhile (oom_kills.h). Empty: not
    // counted (outside a VM the counter is the host's, which says nothing about the command).
    std::string oom_counter_path;
  };
  enum class Outcome {
    kPeerClosed,  // a stream channel reached EOF (never for a virtio port)
    kViolation,   // a stream channel was closed after a protocol violation
    kShutdown,    // the host sent kShutdown; running commands are left to the caller
    kTerminated,  // not PID 1: SIGTERM/SIGINT/SIGHUP arrived on `signal_fd`
  };
  // Stop reading commands' output while this much is queued for the channel.
  static constexpr size_t kMaxQueuedOutput = 1 << 20;
  // Stop reading the channel while this much control output (or this much more than
  // kMaxQueuedOutput in all) is unsent.
  static constexpr size_t kMaxQueuedControl = 256 << 10;
  // How long a stream channel is kept open to deliver a kGoodbye.
  static constexpr std::chrono::seconds kGoodbyeLinger{2};

  Agent(Channel channel, Options options);
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;
  // Kills and reaps every command still running.
  ~Agent() override;

  // Serves hosts until the outcome, then closes the channel. Call once. Errors are fatal
  // (poll failed).
  [[nodiscard]] absl::StatusOr<Outcome> Run();

  // Largest number of unsent bytes the channel queue has held (readable from any thread).
  [[nodiscard]] size_t peak_pending() const { return peak_pending_.load(); }

 private:
  enum class State { kAwaitHello, kOpen, kClosing };
  struct Orphan {  // killed, not yet reaped
    pid_t pid;
    base::UniqueFd pidfd;
  };

  void Send(proto::FrameType type, uint32_t stream, uint8_t flags,
            absl::string_view payload) override;
  [[nodiscard]] bool CanTakeInput() const;
  void ReadChannel();
  void ProcessInput();
  void HandleFrame(const proto::Frame& frame);
  void HandleHello(const proto::Frame& frame);
  void HandleOpen(const proto::Frame& frame);
  [[nodiscard]] absl::Status HandleStreamFrame(const proto::Frame& frame);
  [[nodiscard]] absl::Status HandleTunnelFrame(const proto::Frame& frame);
  void Violation(absl::string_view why);
  void HostGone(absl::string_view why);
  void ResetSession();
  void AbortStream(ExecStream& stream);
  void HandleSignals();
  void ChildExited(pid_t pid, const base::ExitStatus& status);
  void ReapOrphansBlocking();
  [[nodiscard]] int PollTimeoutMs(Clock::time_point now) const;

  Channel channel_;
  Options options_;
  State state_ = State::kAwaitHello;
  std::optional<Outcome> outcome_;
  // Virtio port: whether a host is connected, and when to look again if not.
  bool connected_;
  Clock::time_point retry_at_;
  std::chrono::milliseconds retry_backoff_;
  Clock::time_point linger_until_;
  proto::FrameDecoder decoder_;
  uint32_t send_window_ = proto::kDefaultWindow;
  uint32_t max_payload_ = proto::kMaxPayload;
  uint32_t last_opened_ = 0;  // stream ids must increase: a smaller one was used already
  // Frames dropped while awaiting hello: what a previous host wrote just before it died can
  // still be in the port's queue when the next host connects (virtio-serial delivers the
  // close and the data on separate queues). Bounded by kMaxStaleFrames.
  uint32_t stale_frames_ = 0;
  std::map<uint32_t, std::unique_ptr<ExecStream>> streams_;
  std::vector<Orphan> orphans_;
  std::string read_buf_;  // the last read from the channel; [input_off_, input_len_) unprocessed
  size_t input_off_ = 0;
  size_t input_len_ = 0;
  std::string scratch_;
  std::atomic<size_t> peak_pending_{0};
};

}  // namespace abox::guest
