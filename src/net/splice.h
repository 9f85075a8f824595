// The upstream side of a proxied connection: connecting to the addresses the host resolved,
// and copying bytes both ways between the guest's tunnel and that socket.
//
// Splice assumes what TunnelStream promises: Read on one thread while another Writes, and
// Reset from any thread unblocks both. The upstream peer is untrusted too (it may stall or
// reset); every wait is bounded by the idle timeout or a cancel fd.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/base/unique_fd.h"
#include "src/net/address_filter.h"
#include "src/net/tunnel.h"

namespace abox::net {

struct UpstreamConnection {
  base::UniqueFd fd;  // connected, non-blocking, close-on-exec
  IpAddress address;
};

// Connects to `port` on each address in turn (non-blocking connect, each attempt bounded so
// later addresses still get a chance before `deadline`) and returns the first that succeeds.
// Cancelled when `cancel_fd` (if >= 0) becomes readable. The error lists every attempt.
[[nodiscard]] absl::StatusOr<UpstreamConnection> ConnectToAny(
    const std::vector<IpAddress>& addresses, uint16_t port, absl::Time deadline,
    int cancel_fd = -1);

// Writes all of `data` to a non-blocking socket, waiting at most until `deadline`.
[[nodiscard]] absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline,
                                   int cancel_fd = -1);

struct SpliceOptions {
  // Both directions quiet this long: the connection is aborted (reset on both sides).
  absl::Duration idle_timeout = absl::Minutes(10);
  // Readable: abort at once (the proxy's shutdown event).
  int cancel_fd = -1;
  // Bytes already read from the guest (the sniffed head), sent upstream first (through
  // `filter_up` when set).
  absl::string_view first_up;
  // Optional: every guest byte passes through this on its way upstream (HTTP: each request head
  // is checked). It appends what may go upstream to `*out`. An error stops the guest ->
  // upstream direction there: `*out` is still sent, the upstream's write side is closed (so it
  // answers what it already got), its remaining bytes reach the guest, then
  // `refusal_reply(error)` does, then EOF. After a refusal the upstream gets at most
  // kRefusalDrainTime of quiet before both sides are reset.
  std::function<absl::Status(absl::string_view in, std::string* out)> filter_up;
  std::function<std::string(const absl::Status& refusal)> refusal_reply;
};

// How long an upstream may stay quiet after a refused request before the splice is aborted.
inline constexpr absl::Duration kRefusalDrainTime = absl::Seconds(10);

struct SpliceResult {
  uint64_t bytes_up = 0;    // guest -> upstream, first_up included
  uint64_t bytes_down = 0;  // upstream -> guest
  // Both sides closed their write halves and every byte was delivered.
  bool clean = false;
  // "closed" or why it was aborted ("idle for 10m", "guest reset: ...", "upstream: ...").
  std::string ended;
  // Not OK when `filter_up` refused guest bytes (its error).
  absl::Status refused;
};

// Copies guest -> upstream on the calling thread and upstream -> guest on a second thread it
// starts and joins, until both directions have ended. An EOF on one side is passed on as a
// half-close (shutdown(SHUT_WR) upstream, CloseWrite to the guest) and the other direction
// goes on. An error on either side aborts both: the tunnel is Reset and the upstream socket is
// closed with an RST. Takes ownership of `upstream` (the fd is closed on return).
SpliceResult Splice(TunnelStream& guest, base::UniqueFd upstream, const SpliceOptions& options);

}  // namespace abox::net
