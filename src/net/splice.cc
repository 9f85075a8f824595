#include "src/net/splice.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/status_macros.h"
#include "src/net/fd_stream.h"

namespace abox::net {
namespace {

// A connect attempt gets at least this long (or what is left) so one black-holed address does
// not starve the rest, nor the rest starve it.
constexpr absl::Duration kMinAttempt = absl::Seconds(2);

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
};

SockAddr ToSockAddr(const IpAddress& address, uint16_t port) {
  SockAddr out;
  if (address.is_v4()) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    std::memcpy(&sin.sin_addr, address.bytes().data(), 4);
    std::memcpy(&out.storage, &sin, sizeof(sin));
    out.len = sizeof(sin);
  } else {
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(port);
    std::memcpy(&sin6.sin6_addr, address.bytes().data(), 16);
    std::memcpy(&out.storage, &sin6, sizeof(sin6));
    out.len = sizeof(sin6);
  }
  return out;
}

absl::StatusOr<base::UniqueFd> ConnectOne(const IpAddress& address, uint16_t port,
                                          absl::Time deadline, int cancel_fd) {
  base::UniqueFd fd(::socket(address.is_v4() ? AF_INET : AF_INET6,
                             SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    return base::ErrnoError("socket");
  }
  // The proxy writes upstream what it has just read (and, for TLS it terminates, each record
  // the guest sent as its own write): with Nagle, the second write of a request (a body after
  // its head) waited for the upstream's delayed ACK, ~40 ms a request (bench/intercept_bench).
  // The guest's own stack has already decided how to segment.
  int one = 1;
  if (::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return base::ErrnoError("setsockopt(TCP_NODELAY)");
  }
  SockAddr sa = ToSockAddr(address, port);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa.storage), sa.len) == 0) {
    return fd;
  }
  if (errno != EINPROGRESS && errno != EINTR) {
    return base::ErrnoError("connect");
  }
  ABOX_ASSIGN_OR_RETURN(FdWait wait, WaitForFd(fd.get(), POLLOUT, deadline, cancel_fd));
  if (wait == FdWait::kCancelled) {
    return absl::CancelledError("connect cancelled (proxy shutting down)");
  }
  if (wait == FdWait::kTimeout) {
    return absl::DeadlineExceededError("connect timed out");
  }
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
    return base::ErrnoError("getsockopt(SO_ERROR)");
  }
  if (err != 0) {
    return base::ErrnoError("connect", err);
  }
  return fd;
}

}  // namespace

absl::StatusOr<UpstreamConnection> ConnectToAny(const std::vector<IpAddress>& addresses,
                                                uint16_t port, absl::Time deadline, int cancel_fd) {
  if (addresses.empty()) {
    return absl::InvalidArgumentError("no address to connect to");
  }
  std::vector<std::string> failures;
  for (size_t i = 0; i < addresses.size(); ++i) {
    absl::Time now = absl::Now();
    if (now >= deadline) {
      failures.push_back(absl::StrCat(addresses[i].ToUriHost(), ":", port, " not tried (timeout)"));
      break;
    }
    absl::Duration share = (deadline - now) / static_cast<int64_t>(addresses.size() - i);
    absl::Time attempt_deadline = std::min(deadline, now + std::max(share, kMinAttempt));
    absl::StatusOr<base::UniqueFd> fd = ConnectOne(addresses[i], port, attempt_deadline, cancel_fd);
    if (fd.ok()) {
      return UpstreamConnection{std::move(*fd), addresses[i]};
    }
    failures.push_back(
        absl::StrCat(addresses[i].ToUriHost(), ":", port, ": ", fd.status().message()));
    if (absl::IsCancelled(fd.status())) {
      return absl::CancelledError(absl::StrJoin(failures, "; "));
    }
  }
  return absl::UnavailableError(absl::StrCat("could not connect: ", absl::StrJoin(failures, "; ")));
}

SpliceResult Splice(TunnelStream& guest, base::UniqueFd upstream, const SpliceOptions& options) {
  absl::StatusOr<std::unique_ptr<FdStream>> stream = FdStream::Create(
      std::move(upstream), {.write_timeout = options.idle_timeout, .cancel_fd = options.cancel_fd});
  if (!stream.ok()) {
    SpliceResult result;
    result.ended = absl::StrCat("upstream: ", stream.status().message());
    guest.Reset(result.ended);
    return result;
  }
  return SpliceStreams(guest, **stream, options);
}

}  // namespace abox::net
