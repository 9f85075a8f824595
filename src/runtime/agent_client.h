#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/base/unique_fd.h"
#include "src/proto/host_session.h"

namespace abox::runtime {

class AgentClient;

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
  // finished (or failed) and all of its output was read.
  std::optional<Chunk> ReadOutput();
  // The result, after ReadOutput() returned nullopt (blocks until then otherwise). An error
  // when the stream was aborted (guest reset, connection lost).
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
  Exec(AgentClient* client, uint32_t stream);

  AgentClient* client_;
  uint32_t stream_;
  // Guarded by client_->mu_.
  std::deque<Chunk> chunks_;
  size_t unconsumed_ = 0;  // bytes handed out by ReadOutput and not yet re-credited
  std::optional<proto::ExitInfo> exit_;
  std::optional<std::string> reset_;
  std::unique_ptr<Sink> sink_;
};

// The host end of one agent channel: runs the protocol (proto::HostSession) on an I/O thread
// over a connected stream socket. Owns the socket and the thread. Thread-safe. The trust
// boundary is the HostSession: any violation drops the connection, fails every running exec
// and reports the reason through failure() and the failure callback.
class AgentClient final {
 public:
  struct Options {
    proto::HostSession::Options session;
    // Called once, on the I/O thread, when the connection fails.
    std::function<void(const absl::Status&)> on_failure;
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
  void Wake();
  void FailLocked(const absl::Status& reason);

  base::UniqueFd channel_;
  base::UniqueFd wake_;  // eventfd: wakes the I/O thread when there is output to send
  Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  proto::HostSession session_;  // guarded by mu_
  absl::Status failure_;        // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  uint64_t ping_seq_ = 0;       // guarded by mu_
  std::thread thread_;
};

}  // namespace abox::runtime
