// Test doubles for the stream layer (header-only, tests only): two FdStreams joined by a
// socketpair, and a guest tunnel and an upstream socket to splice.
#pragma once

#include <sys/socket.h>

#include <cstdlib>
#include <memory>
#include <utility>

#include "src/base/io.h"
#include "src/net/fd_stream.h"
#include "src/net/testing/socket_tunnel.h"

namespace abox::net::testing {

// Two connected non-blocking socket ends; aborts the test binary when they cannot be made.
inline std::pair<base::UniqueFd, base::UniqueFd> NonBlockingSocketPair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) {
    std::abort();
  }
  return {base::UniqueFd(fds[0]), base::UniqueFd(fds[1])};
}

struct StreamPair {
  std::unique_ptr<FdStream> a;
  std::unique_ptr<FdStream> b;
};

// `a` and `b` talk to each other. Writes give up after 10 s without progress, so a broken test
// fails instead of hanging.
inline StreamPair MakeStreamPair() {
  auto [x, y] = NonBlockingSocketPair();
  FdStream::Options options{.write_timeout = absl::Seconds(10)};
  StreamPair pair{*FdStream::Create(std::move(x), options),
                  *FdStream::Create(std::move(y), options)};
  return pair;
}

// A splice's surroundings: the guest's tunnel and the upstream socket, each with the peer's end.
struct SplicePeers {
  std::unique_ptr<SocketTunnel> tunnel;  // the proxy's end of the guest's tunnel
  base::UniqueFd guest;                  // the guest's end (10 s receive timeout)
  base::UniqueFd upstream;               // the proxy's end of the upstream socket (non-blocking)
  base::UniqueFd upstream_peer;          // the upstream server's end (blocking, 10 s timeout)
};

inline SplicePeers MakeSplicePeers() {
  SplicePeers s;
  auto [tunnel, guest] = SocketTunnel::Make(TunnelInfo{});
  s.tunnel = std::move(tunnel);
  s.guest = std::move(guest);
  auto [ours, theirs] = NonBlockingSocketPair();
  s.upstream = std::move(ours);
  s.upstream_peer = std::move(theirs);
  if (!base::SetNonBlocking(s.upstream_peer.get(), false).ok()) {
    std::abort();
  }
  timeval tv{10, 0};
  ::setsockopt(s.upstream_peer.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return s;
}

}  // namespace abox::net::testing
