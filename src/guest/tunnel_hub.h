// The guest's egress: accepts local connections and DNS queries on the egress sockets and
// carries each over its own tunnel stream to the host (protocol v2). Driven by the Agent's poll
// loop on its thread.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/guest/egress_sockets.h"
#include "src/guest/guest_tunnel.h"
#include "src/proto/frame.h"

namespace abox::guest {

// Owns the egress sockets and every open tunnel. Tunnel ids are even and increase within a
// session. Nothing here is trusted for enforcement (the VM has no NIC: the channel is the only
// way out, and the host decides); it exists so that ordinary tools work unchanged.
// Bounded: at most max_tunnels tunnels (the TCP listeners wait in their backlog beyond it), at
// most max_dns_in_flight UDP queries (more are dropped, as a lossy network would), one window of
// host data per tunnel. Without a session (no host) connections are reset and queries answered
// REFUSED at once. Not thread-safe.
class TunnelHub final {
 public:
  // Where a connection on the transparent port was going (SO_ORIGINAL_DST; tests fake it).
  using OriginalDestinationFn = std::function<absl::StatusOr<proto::TunnelRequest>(int fd)>;
  struct Options {
    EgressSockets sockets;
    OriginalDestinationFn original_destination = OriginalDestination;
    size_t max_tunnels = proto::kMaxTunnels;
    size_t max_dns_in_flight = 64;
    std::chrono::milliseconds dns_timeout{10'000};
  };

  explicit TunnelHub(Options options);
  TunnelHub(const TunnelHub&) = delete;
  TunnelHub& operator=(const TunnelHub&) = delete;
  ~TunnelHub();

  // A session started: tunnels may be opened with the host's window and payload limit.
  void Start(uint32_t send_window, uint32_t max_payload);
  // The session ended: every tunnel is aborted (programs see a reset); ids start again.
  void Stop();

  // Appends what to poll. `may_send`: the channel has room for more data.
  void AppendPollFds(bool may_send, std::vector<pollfd>* fds);
  // Handles the results for the entries AppendPollFds added (`fds` points at the first).
  // `may_send` is asked again before each read, as other streams fill the channel.
  void OnPolled(const pollfd* fds, size_t count, char* scratch, FrameSink& sink,
                const std::function<bool()>& may_send);
  [[nodiscard]] std::optional<Clock::time_point> NextDeadline() const;
  void OnTimer(Clock::time_point now, FrameSink& sink);

  // A host frame on a tunnel stream (tunnel_data, credit, reset). Errors are protocol
  // violations; frames for a tunnel that has ended (they crossed our reset or EOF) are ignored.
  [[nodiscard]] absl::Status HandleFrame(const proto::Frame& frame, FrameSink& sink);

  [[nodiscard]] size_t open_tunnels() const { return tunnels_.size(); }
  [[nodiscard]] const EgressSockets& sockets() const { return options_.sockets; }

 private:
  struct PollEntry {
    enum Kind { kListener, kDnsUdp, kTunnel } kind;
    int fd = -1;
    proto::TunnelKind tunnel_kind = proto::TunnelKind::kTcp;
    uint32_t id = 0;
  };

  void Accept(const PollEntry& listener, FrameSink& sink);
  void ReceiveDns(char* scratch, FrameSink& sink);
  // The next stream id, or nullopt when the id space is used up.
  std::optional<uint32_t> TakeId();
  size_t dns_in_flight() const;
  void Reap();

  Options options_;
  bool active_ = false;
  uint32_t send_window_ = proto::kDefaultWindow;
  uint32_t max_payload_ = proto::kMaxPayload;
  uint32_t next_id_ = 2;
  std::map<uint32_t, std::unique_ptr<GuestTunnel>> tunnels_;
  std::vector<PollEntry> polled_;  // what the entries of the last AppendPollFds were
};

}  // namespace abox::guest
