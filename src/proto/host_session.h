#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/proto/frame.h"
#include "src/proto/messages.h"

namespace abox::proto {

// Receives what the guest sends for one exec stream. Called from HostSession::OnBytes (and
// Fail), on the caller's thread; implementations must not call back into the session.
class ExecSink {
 public:
  virtual ~ExecSink() = default;
  virtual void OnStdout(absl::string_view data) = 0;
  virtual void OnStderr(absl::string_view data) = 0;
  virtual void OnOutputEof(bool is_stderr) { (void)is_stderr; }
  // Final: the command finished. No further calls for this stream.
  virtual void OnExit(const ExitInfo& info) = 0;
  // Final: the stream was aborted (guest reset it, or the connection failed).
  virtual void OnReset(absl::string_view error) = 0;
};

// Receives what the guest sends on one tunnel stream. Called from HostSession::OnBytes (and
// Fail), on the caller's thread; implementations must not call back into the session.
class TunnelSink {
 public:
  virtual ~TunnelSink() = default;
  // Tunnel bytes; the owner returns their credit with ConsumedTunnel() once it has used them.
  virtual void OnData(absl::string_view data) = 0;
  // The guest closed its write half.
  virtual void OnEof() = 0;
  // Final: the guest reset the tunnel, or the connection failed. No further calls.
  virtual void OnReset(absl::string_view error) = 0;
};

// Decides about tunnels the guest opens. Called from HostSession::OnBytes on the caller's
// thread; must not call back into the session.
class TunnelAcceptor {
 public:
  virtual ~TunnelAcceptor() = default;
  // The sink for tunnel `stream` (it must stay valid until OnReset, ResetTunnel or the end of
  // both directions), or an error: the session resets the tunnel with the error's message.
  virtual absl::StatusOr<TunnelSink*> OnTunnelOpen(uint32_t stream,
                                                   const TunnelRequest& request) = 0;
};

// The host side of the agent protocol as a state machine without I/O ("sans-IO"): bytes from
// the guest go into OnBytes(), bytes for the guest come out of TakeOutput(). This is the host's
// trust boundary: everything in OnBytes() is hostile and every violation (bad frame, unknown
// stream, data beyond credit, malformed JSON, missed heartbeats, a guest that stops reading)
// returns an error after which the caller must drop the connection and call Fail().
// Memory is bounded: at most one partial frame is buffered, guest output is handed straight
// to the sink and its credit is only returned by ConsumedOutput() / ConsumedTunnel(), at most
// kMaxStreams execs and kMaxTunnels tunnels are open (further tunnels are reset, not a
// violation), and unsent output beyond kMaxPendingOutput is itself a violation.
// Tunnel ids are even and strictly increasing: opening an odd, reused or lower id is a
// violation; a frame on an id below the last one opened that is no longer open crossed our
// reset or the end of the tunnel and is ignored (data, credit and reset alike). Not thread-safe.
class HostSession final {
 public:
  struct Options {
    absl::Duration ping_interval = absl::Seconds(5);
    // No pong (or any frame) for this long after a ping: the guest is declared dead.
    absl::Duration ping_timeout = absl::Seconds(30);
  };
  // Unsent bytes for the guest beyond this mean the guest is not reading its channel.
  static constexpr size_t kMaxPendingOutput = 4 << 20;

  explicit HostSession(Options options);
  HostSession(const HostSession&) = delete;
  HostSession& operator=(const HostSession&) = delete;

  // Queues our Hello. Call once, first.
  void Start(absl::Time now);
  // True once the guest's Hello was accepted.
  [[nodiscard]] bool ready() const { return peer_.has_value(); }
  [[nodiscard]] const std::optional<Hello>& peer() const { return peer_; }
  [[nodiscard]] uint32_t version() const { return version_; }
  // The connection failed (set by Fail or a violation); nothing more is accepted.
  [[nodiscard]] bool failed() const { return failed_; }

  // Consumes bytes from the guest. An error is a protocol violation.
  [[nodiscard]] absl::Status OnBytes(absl::string_view data, absl::Time now);
  // Sends pings and checks the heartbeat deadline. Returns an error when the guest is dead.
  [[nodiscard]] absl::Status Tick(absl::Time now);
  // The next deadline at which Tick() must run.
  [[nodiscard]] absl::Time NextTick() const;

  // Bytes to write to the channel (drains the buffer).
  std::string TakeOutput();
  [[nodiscard]] size_t PendingOutput() const { return output_.size(); }

  // Opens an exec stream. `sink` must outlive the stream (until OnExit/OnReset).
  [[nodiscard]] absl::StatusOr<uint32_t> OpenExec(const ExecRequest& request, ExecSink* sink);
  // Queues up to StdinCredit(stream) bytes of stdin; returns how many were taken.
  size_t SendStdin(uint32_t stream, absl::string_view data);
  [[nodiscard]] size_t StdinCredit(uint32_t stream) const;
  void CloseStdin(uint32_t stream);
  void Signal(uint32_t stream, int signal);
  void Resize(uint32_t stream, PtySize size);
  // The sink's owner has finished with `n` bytes of output: returns credit to the guest.
  void ConsumedOutput(uint32_t stream, size_t n);
  // The sink's owner goes away before the stream ended: kills the command (SIGKILL to its
  // process group) and discards what else arrives on the stream, re-crediting it at once.
  void Detach(uint32_t stream);
  // Where tunnels the guest opens go; without an acceptor every tunnel is reset.
  void set_tunnel_acceptor(TunnelAcceptor* acceptor) { acceptor_ = acceptor; }
  // Queues up to TunnelCredit(stream) bytes for the guest; returns how many were taken.
  size_t SendTunnel(uint32_t stream, absl::string_view data);
  [[nodiscard]] size_t TunnelCredit(uint32_t stream) const;
  // Closes our write half (tunnel_data with EOF). The tunnel ends once both halves are closed.
  void CloseTunnel(uint32_t stream);
  // Aborts the tunnel: the guest gets a reset; the sink is not called again. No-op for a tunnel
  // that has already ended.
  void ResetTunnel(uint32_t stream, absl::string_view reason);
  // The sink's owner has used `n` bytes of tunnel data: returns credit to the guest.
  void ConsumedTunnel(uint32_t stream, size_t n);
  [[nodiscard]] size_t open_tunnels() const { return tunnels_.size(); }
  // Asks the guest to power off.
  void Shutdown();
  // Queues a ping with `payload` (<= 64 bytes); its pong shows up in last_pong().
  void Ping(absl::string_view payload);
  [[nodiscard]] const std::string& last_pong() const { return last_pong_; }
  // Marks the connection failed; every open stream's sink gets OnReset(reason).
  void Fail(absl::string_view reason);
  [[nodiscard]] size_t open_streams() const { return streams_.size(); }

 private:
  struct Stream {
    ExecSink* sink = nullptr;
    CreditWindow send;  // stdin we may send
    CreditWindow recv;  // stdout + stderr the guest may send
    bool stdin_closed = false;
    bool stdout_eof = false;
    bool stderr_eof = false;
    bool detached = false;
  };
  struct Tunnel {
    TunnelSink* sink = nullptr;
    CreditWindow send;  // bytes we may send
    CreditWindow recv;  // bytes the guest may send
    bool guest_eof = false;
    bool host_eof = false;
  };
  struct DiscardSink final : ExecSink {
    void OnStdout(absl::string_view) override {}
    void OnStderr(absl::string_view) override {}
    void OnExit(const ExitInfo&) override {}
    void OnReset(absl::string_view) override {}
  };

  absl::Status HandleFrame(const Frame& frame, absl::Time now);
  absl::Status HandleControl(const Frame& frame, absl::Time now);
  absl::Status HandleStream(const Frame& frame);
  absl::Status HandleTunnel(const Frame& frame);
  absl::Status OpenTunnel(const Frame& frame);
  void Queue(FrameType type, uint32_t stream, uint8_t flags, absl::string_view payload);
  // Queues as much of `data` as `window` allows, in kMaxPayload frames; returns how much.
  size_t QueueData(FrameType type, uint32_t stream, CreditWindow& window, absl::string_view data);

  Options options_;
  FrameDecoder decoder_;
  std::string output_;
  std::optional<Hello> peer_;
  uint32_t version_ = 0;
  bool started_ = false;
  bool failed_ = false;
  uint32_t next_stream_ = 1;
  std::map<uint32_t, Stream> streams_;
  std::map<uint32_t, Tunnel> tunnels_;
  uint32_t last_tunnel_ = 0;  // the highest tunnel id the guest opened
  TunnelAcceptor* acceptor_ = nullptr;
  DiscardSink discard_sink_;
  absl::Time last_heard_ = absl::InfinitePast();
  absl::Time last_ping_sent_ = absl::InfinitePast();
  absl::Time ping_outstanding_since_ = absl::InfiniteFuture();
  uint64_t ping_seq_ = 0;
  std::string last_pong_;
};

}  // namespace abox::proto
