#include "src/net/fd_stream.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "src/base/status_macros.h"

namespace abox::net {
namespace {

absl::Status ResetError() { return absl::AbortedError("connection reset by the proxy"); }

}  // namespace

absl::StatusOr<FdWait> WaitForFd(int fd, short events, absl::Time deadline, int cancel_fd,
                                 int reset_fd) {
  for (;;) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return FdWait::kTimeout;
    }
    // Capped (an infinite deadline re-polls hourly) and rounded up so a sub-millisecond
    // remainder does not spin.
    int timeout_ms =
        static_cast<int>(absl::ToInt64Milliseconds(std::min(left, absl::Hours(1)))) + 1;
    // poll() ignores negative fds, so an absent cancel or reset fd needs no special case.
    pollfd fds[3] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}, {reset_fd, POLLIN, 0}};
    int n = ::poll(fds, 3, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return base::ErrnoError("poll");
    }
    if (fds[1].revents != 0 || fds[2].revents != 0) {
      return FdWait::kCancelled;
    }
    if (fds[0].revents != 0) {
      return FdWait::kReady;
    }
  }
}

absl::StatusOr<std::unique_ptr<FdStream>> FdStream::Create(base::UniqueFd fd, Options options) {
  base::UniqueFd reset_event(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!reset_event) {
    return base::ErrnoError("eventfd");
  }
  return std::unique_ptr<FdStream>(new FdStream(std::move(fd), std::move(reset_event), options));
}

absl::Status FdStream::WaitFor(short events, absl::Time deadline) const {
  ABOX_ASSIGN_OR_RETURN(
      FdWait wait, WaitForFd(fd_.get(), events, deadline, options_.cancel_fd, reset_event_.get()));
  switch (wait) {
    case FdWait::kReady:
      return absl::OkStatus();
    case FdWait::kTimeout:
      return events == POLLOUT ? absl::DeadlineExceededError("send timed out (peer not reading)")
                               : absl::DeadlineExceededError("read timed out");
    case FdWait::kCancelled:
      break;
  }
  if (reset_.load()) {
    return ResetError();
  }
  return absl::CancelledError("cancelled (proxy shutting down)");
}

absl::StatusOr<size_t> FdStream::Read(char* buf, size_t len, absl::Time deadline) {
  for (;;) {
    // Waiting first, even when data may be queued: after Reset nothing more is delivered.
    ABOX_RETURN_IF_ERROR(WaitFor(POLLIN, deadline));
    ssize_t n = ::recv(fd_.get(), buf, len, MSG_DONTWAIT);
    if (reset_.load()) {
      return ResetError();  // a Reset between the wait and the recv (which then read EOF)
    }
    if (n >= 0) {
      return static_cast<size_t>(n);
    }
    if (errno != EINTR && errno != EAGAIN) {
      return base::ErrnoError("recv");
    }
  }
}

absl::Status FdStream::Write(absl::string_view data) {
  absl::Time deadline = absl::Now() + options_.write_timeout;
  while (!data.empty()) {
    ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
      deadline = absl::Now() + options_.write_timeout;
      continue;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno != EAGAIN) {
      return reset_.load() ? ResetError() : base::ErrnoError("send");
    }
    ABOX_RETURN_IF_ERROR(WaitFor(POLLOUT, deadline));
  }
  return absl::OkStatus();
}

void FdStream::CloseWrite() { ::shutdown(fd_.get(), SHUT_WR); }

void FdStream::Reset(absl::string_view /*reason*/) {
  reset_.store(true);
  // An RST, not a FIN: the peer must not take an aborted stream for a complete one (a
  // shutdown() here would send a FIN first). connect(AF_UNSPEC) disconnects a TCP socket at
  // once, with an RST; SO_LINGER 0 makes the close send one too should the socket be in another
  // state. Other sockets (a unix socketpair in tests) have no RST: their peer gets EOF.
  linger lin{1, 0};
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
  sockaddr unspec{};
  unspec.sa_family = AF_UNSPEC;
  if (::connect(fd_.get(), &unspec, sizeof(unspec)) != 0) {
    ::shutdown(fd_.get(), SHUT_RDWR);
  }
  // Wakes a Read or Write polling on another thread; every later one fails at once.
  uint64_t one = 1;
  // Cannot fail short of a full counter, which would take 2^64 resets.
  (void)!::write(reset_event_.get(), &one, sizeof(one));
}

}  // namespace abox::net
