// The guest's end of tunnel streams (protocol v2): a local TCP connection spliced to a tunnel
// (SpliceTunnel), and the common interface the TunnelHub drives. See docs/protocol.md.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/base/unique_fd.h"
#include "src/guest/exec_stream.h"
#include "src/proto/frame.h"
#include "src/proto/messages.h"

namespace abox::guest {

// One tunnel stream as the guest sees it. Frames from the host are validated: data beyond the
// window, data after the host's EOF or an invalid grant is returned as an error (a protocol
// violation). Not thread-safe.
class GuestTunnel {
 public:
  explicit GuestTunnel(uint32_t id) : id_(id) {}
  GuestTunnel(const GuestTunnel&) = delete;
  GuestTunnel& operator=(const GuestTunnel&) = delete;
  virtual ~GuestTunnel() = default;

  [[nodiscard]] uint32_t id() const { return id_; }
  // Over: nothing more is sent or expected; the hub drops it.
  [[nodiscard]] virtual bool done() const = 0;

  // What to poll (fd -1: nothing). `may_send`: the channel has room for more data.
  [[nodiscard]] virtual pollfd PollFor(bool may_send) const {
    (void)may_send;
    return {-1, 0, 0};
  }
  // Poll results for PollFor's fd. `scratch` has room for kMaxPayload bytes.
  virtual void OnPollReady(short revents, char* scratch, FrameSink& sink) {
    (void)revents;
    (void)scratch;
    (void)sink;
  }
  [[nodiscard]] virtual std::optional<Clock::time_point> Deadline() const { return std::nullopt; }
  virtual void OnTimer(Clock::time_point now, FrameSink& sink) {
    (void)now;
    (void)sink;
  }

  // Frames from the host. Errors are protocol violations.
  [[nodiscard]] virtual absl::Status OnData(absl::string_view data, bool eof, FrameSink& sink) = 0;
  [[nodiscard]] virtual absl::Status OnCredit(uint32_t bytes) = 0;
  // The host reset the tunnel (denied, upstream failed). Final.
  virtual void OnReset(absl::string_view error) = 0;
  // The session ended (host gone, violation): abort the local side. Final.
  virtual void Abort() = 0;

 private:
  const uint32_t id_;
};

// Sends kTunnelOpen for `request` on stream `id`.
void SendTunnelOpen(uint32_t id, const proto::TunnelRequest& request, FrameSink& sink);

// Closes `fd` so that the peer sees a reset (RST), not an orderly end: what a refused or aborted
// connection must look like to the guest program.
void CloseWithReset(base::UniqueFd& fd);

// A local TCP connection (accepted on the transparent, HTTP proxy or DNS port) spliced to a
// tunnel. Guest -> host: the socket is read only while the host's window and the channel have
// room, so a fast sender blocks in its socket buffer. Host -> guest: at most one window is
// buffered here; credit goes back as bytes enter the socket. EOF is carried per direction
// (shutdown(SHUT_WR) towards the program); a reset either way resets the other side.
class SpliceTunnel final : public GuestTunnel {
 public:
  // Takes the non-blocking socket and sends kTunnelOpen.
  SpliceTunnel(uint32_t id, base::UniqueFd socket, const proto::TunnelRequest& request,
               uint32_t send_window, uint32_t max_payload, FrameSink& sink);

  [[nodiscard]] bool done() const override { return done_; }
  [[nodiscard]] pollfd PollFor(bool may_send) const override;
  void OnPollReady(short revents, char* scratch, FrameSink& sink) override;
  [[nodiscard]] absl::Status OnData(absl::string_view data, bool eof, FrameSink& sink) override;
  [[nodiscard]] absl::Status OnCredit(uint32_t bytes) override;
  void OnReset(absl::string_view error) override;
  void Abort() override;

 private:
  void ReadLocal(char* scratch, FrameSink& sink);
  void WriteLocal(FrameSink& sink);
  // The local side failed: reset the tunnel and the socket.
  void Fail(absl::string_view why, FrameSink& sink);
  void MaybeFinish();

  base::UniqueFd socket_;
  const uint32_t max_payload_;
  proto::CreditWindow send_;  // bytes we may send to the host
  proto::CreditWindow recv_;  // bytes the host may send us
  std::string inbox_;         // from the host, not yet in the socket (<= one window)
  size_t inbox_off_ = 0;
  bool local_eof_ = false;  // the program closed its write half; our EOF was sent
  bool host_eof_ = false;   // the host closed its write half
  bool shut_wr_ = false;    // ... and the program was told (shutdown(SHUT_WR))
  bool done_ = false;
};

}  // namespace abox::guest
