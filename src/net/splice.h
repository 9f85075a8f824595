// The upstream side of a proxied connection: connecting to the addresses the host resolved,
// and copying bytes both ways between the guest's tunnel and that socket (SpliceStreams over
// an FdStream).
//
// The upstream peer is untrusted (it may stall, black-hole or reset); every wait is bounded by
// a deadline, the idle timeout or a cancel fd.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/base/unique_fd.h"
#include "src/net/address_filter.h"
#include "src/net/stream_splice.h"
#include "src/net/tunnel.h"

namespace abox::net {

struct UpstreamConnection {
  base::UniqueFd fd;  // connected, non-blocking, close-on-exec, TCP_NODELAY
  IpAddress address;
};

// Connects to `port` on each address in turn (non-blocking connect, each attempt bounded so
// later addresses still get a chance before `deadline`) and returns the first that succeeds.
// Cancelled when `cancel_fd` (if >= 0) becomes readable. The error lists every attempt.
[[nodiscard]] absl::StatusOr<UpstreamConnection> ConnectToAny(
    const std::vector<IpAddress>& addresses, uint16_t port, absl::Time deadline,
    int cancel_fd = -1);

// The options of SpliceStreams, and the proxy's shutdown event for the socket side.
struct SpliceOptions : StreamSpliceOptions {
  // Readable: abort at once (the proxy's shutdown event).
  int cancel_fd = -1;
};

// SpliceStreams between `guest` and the socket `upstream` (as an FdStream whose writes may stall
// for the idle timeout). The upstream socket is closed with an RST when the splice is aborted.
// Takes ownership of `upstream` (the fd is closed on return).
SpliceResult Splice(TunnelStream& guest, base::UniqueFd upstream, const SpliceOptions& options);

}  // namespace abox::net
