// Test doubles for the stream layer (header-only, tests only): two FdStreams joined by a
// socketpair, a guest tunnel and an upstream socket to splice, and the TLS material to terminate
// and verify a connection for one host (an in-memory constrained interception CA, its leaf cache,
// and the CA certificate in a PEM file for UpstreamTrust).
#pragma once

#include <sys/socket.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "src/base/io.h"
#include "src/base/testing/temp_dir.h"
#include "src/net/fd_stream.h"
#include "src/net/intercept_ca.h"
#include "src/net/leaf_cache.h"
#include "src/net/testing/socket_tunnel.h"
#include "src/net/tls_stream.h"

namespace abox::net::testing {

inline constexpr char kTestHost[] = "api.example.test";

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

// A CA constrained to kTestHost (in memory), a leaf cache over it, and the CA certificate in a
// PEM file for UpstreamTrust. `now` dates the CA and the leaves (an old `now` makes expired
// leaves).
class TestPki final {
 public:
  explicit TestPki(absl::Time now = absl::Now())
      : ca_(*InterceptCa::CreateConstrained({kTestHost}, now)),
        cache_(*ca_, {.now = [now] { return now; }}) {
    ca_file_ = dir_.file("ca.pem");
    if (!base::WriteFileAtomic(ca_file_, ca_->CertificatePem()).ok()) {
      std::abort();
    }
  }

  // The server context presenting a leaf for kTestHost.
  SSL_CTX* server_ctx() { return (*cache_.Get(kTestHost))->server_ctx.get(); }
  const std::string& ca_file() const { return ca_file_; }
  // Trusts the system store and the test CA.
  std::shared_ptr<const UpstreamTrust> trust() const { return *UpstreamTrust::Create({ca_file_}); }

 private:
  base::testing::TempDir dir_;
  std::unique_ptr<InterceptCa> ca_;
  LeafCache cache_;
  std::string ca_file_;
};

}  // namespace abox::net::testing
