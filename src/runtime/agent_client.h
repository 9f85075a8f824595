#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/base/unique_fd.h"
#include "src/net/tunnel.h"
#include "src/proto/host_session.h"

namespace abox::runtime {

class AgentClient;
class AgentTunnel;
class Exec;

namespace internal {
// What an agent connection's client, execs and tunnels share. Tunnels hold it by shared_ptr
// because the egress proxy owns them and may keep one past the client: once the client is gone
// the session is failed, so every call on such a tunnel fails or does nothing.
struct AgentCore {
  explicit AgentCore(base::UniqueFd wake_fd, proto::HostSession::Options session_options)
      : wake(std::move(wake_fd)), session(session_options) {}
  // Wakes the I/O thread (there is output for the guest).
  void Wake() const;

  const base::UniqueFd wake;  // eventfd
  mutable std::mutex mu;
  std::condition_variable cv;
  proto::HostSession session;  // guarded by mu
  absl::Status failure;        // guarded by mu
  // Running execs that have a timeout, by stream: the I/O thread holds their deadline (see
  // AgentClient::Options::timeout_grace). Guarded by mu; an Exec removes itself when it ends or
  // is destroyed.
  std::map<uint32_t, Exec*> timed_execs;
};
}  // namespace internal

// One command running in the guest. Thread-safe: output can be read on one thread while
// another writes stdin or sends signals. Host memory per exec is bounded by the protocol's
// credit window: output is only re-credited to the guest once ReadOutput() handed it out.
class Exec final {
 public:
  struct Chunk {
    bool is_stderr = false;
    std::string data;
  };

  Exec(const Exec&) = delete;
  Exec& operator=(const Exec&) = delete;
  ~Exec();

  // The next piece of output, blocking until there is one; nullopt once the command has
  // finished (or failed) and all of its output was read. Output of one stream that arrived
  // in several frames since the last call comes as one chunk.
  std::optional<Chunk> ReadOutput();
  // Waits until ReadOutput() would not block, or until `deadline`; returns whether it would
  // not. Returns the credit of the last chunk first, like ReadOutput().
  bool WaitForOutput(absl::Time deadline);
  // What the queued, unread output costs: its bytes (the buffer's capacity) plus its
  // bookkeeping. Bounded by a small multiple of the credit window whatever the frame sizes.
  [[nodiscard]] size_t QueuedOutputMemory() const;
  // The result, after ReadOutput() returned nullopt (blocks until then otherwise). An error
  // when the stream was aborted (guest reset, connection lost). When the host gave up on a
  // guest that did not end a command with a timeout in time (AgentClient::Options::
  // timeout_grace), a timed-out result (SIGKILL) whose `error` says so.
  absl::StatusOr<proto::ExitInfo> Wait();
  // Sends stdin, blocking while the guest grants no credit. Fails once the exec is over.
  absl::Status WriteStdin(absl::string_view data);
  void CloseStdin();
  void Signal(int signal);
  void Resize(proto::PtySize size);
  [[nodiscard]] uint32_t stream() const { return stream_; }

 private:
  friend class AgentClient;
  class Sink;
  Exec(std::shared_ptr<internal::AgentCore> core, uint32_t stream);

  std::shared_ptr<internal::AgentCore> core_;
  uint32_t stream_;
  // Queued output, guarded by core_->mu: its bytes in arrival order from queued_head_ on, and
  // its runs (a length, the stream in kStderrRun). Frames of one stream in a row extend the
  // last run, so a guest's 1-byte frames cost at most 4 bytes of bookkeeping each (when it
  // alternates streams) instead of a string and a queue node each.
  static constexpr uint32_t kStderrRun = 1U << 31;
  std::string queued_;
  size_t queued_head_ = 0;
  std::deque<uint32_t> runs_;
  size_t unconsumed_ = 0;  // bytes handed out by ReadOutput and not yet re-credited
  std::optional<proto::ExitInfo> exit_;
  std::optional<std::string> reset_;
  std::unique_ptr<Sink> sink_;
  // With a timeout: when the host stops waiting for the guest to report the end.
  std::optional<absl::Time> give_up_at_;
  // Set when the host gave up (the connection is failed then): why.
  std::string host_timeout_;
};

// The host end of one agent channel: runs the protocol (proto::HostSession) on an I/O thread
// over a connected stream socket. Owns the socket and the thread. Thread-safe. The trust
// boundary is the HostSession: any violation drops the connection, fails every running exec
// and tunnel and reports the reason through failure() and the failure callback.
class AgentClient final : private proto::TunnelAcceptor {
 public:
  struct Options {
    proto::HostSession::Options session;
    // Called once, on the I/O thread, when the connection fails.
    std::function<void(const absl::Status&)> on_failure;
    // Called on the I/O thread, without locks held, for each tunnel the guest opens (an
    // outgoing connection or DNS query of a guest program). Must not block: hand the tunnel to
    // another thread. Unset: every tunnel is reset with "egress is off for this sandbox".
    std::function<void(std::unique_ptr<net::TunnelStream>)> on_tunnel;
    // The host holds an exec's timeout itself: the guest kills a command when its timeout_ms
    // runs out and reports the end; when that report has not come `timeout_grace` after the
    // timeout (counted from StartExec), the guest is taken to have stopped answering (e.g. a
    // fork bomb starving the agent): the exec ends as timed out and the connection fails, so
    // the owner stops the VM. Not while the exec's output waits for our own reader (the guest
    // may be waiting for credit then; the heartbeat still catches a dead guest).
    absl::Duration timeout_grace = absl::Seconds(2);
  };

  static absl::StatusOr<std::unique_ptr<AgentClient>> Create(base::UniqueFd channel,
                                                             Options options);
  AgentClient(const AgentClient&) = delete;
  AgentClient& operator=(const AgentClient&) = delete;
  ~AgentClient();

  // Waits for the handshake. Fails when the connection fails first or the deadline passes.
  absl::Status WaitReady(absl::Duration timeout);
  // Starts a command.
  absl::StatusOr<std::unique_ptr<Exec>> StartExec(const proto::ExecRequest& request);
  // One ping round trip through the guest agent (for diagnostics and benchmarks).
  absl::StatusOr<absl::Duration> Ping(absl::Duration timeout);
  // Asks the guest to power off (best effort: the VMM enforces the deadline).
  void Shutdown();
  // Marks the connection failed (e.g. the VM died); running execs end with `reason`.
  void Fail(const absl::Status& reason);
  // The reason the connection failed, or OK while it works.
  [[nodiscard]] absl::Status failure() const;
  // The agent's version string from its hello (empty before the handshake).
  [[nodiscard]] std::string agent_version() const;

 private:
  friend class Exec;
  AgentClient(base::UniqueFd channel, base::UniqueFd wake, Options options);
  void Run();
  // Reads once from the channel into the session; false when the connection failed.
  bool ReadChannel(char* buf, size_t len);
  void FailLocked(const absl::Status& reason);
  // Gives up on timed execs past their deadline (see Options::timeout_grace): false when it
  // failed the connection. Lowers `next` to the earliest deadline still ahead.
  bool CheckExecDeadlinesLocked(absl::Time now, absl::Time& next);
  // proto::TunnelAcceptor, called by the session under core_->mu.
  absl::StatusOr<proto::TunnelSink*> OnTunnelOpen(uint32_t stream,
                                                  const proto::TunnelRequest& request) override;

  base::UniqueFd channel_;
  Options options_;
  std::shared_ptr<internal::AgentCore> core_;
  bool stopping_ = false;  // guarded by core_->mu
  uint64_t ping_seq_ = 0;  // guarded by core_->mu
  // Accepted by the session, not yet handed to on_tunnel. Guarded by core_->mu.
  std::vector<std::unique_ptr<AgentTunnel>> new_tunnels_;
  std::thread thread_;
};

}  // namespace abox::runtime
