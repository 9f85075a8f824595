#include "src/net/splice.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/status_macros.h"

namespace abox::net {
namespace {

constexpr size_t kChunk = size_t{64} * 1024;
// A connect attempt gets at least this long (or what is left) so one black-holed address does
// not starve the rest, nor the rest starve it.
constexpr absl::Duration kMinAttempt = absl::Seconds(2);

enum class Wait : uint8_t { kReady, kTimeout, kCancelled };

// poll() for `events` on `fd` until `deadline`, also waking when `cancel_fd` is readable.
absl::StatusOr<Wait> PollUntil(int fd, short events, absl::Time deadline, int cancel_fd) {
  for (;;) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return Wait::kTimeout;
    }
    // Capped (an infinite deadline re-polls hourly) and rounded up so a sub-millisecond
    // remainder does not spin.
    int timeout_ms =
        static_cast<int>(absl::ToInt64Milliseconds(std::min(left, absl::Hours(1)))) + 1;
    pollfd fds[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    int n = ::poll(fds, cancel_fd >= 0 ? 2 : 1, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return base::ErrnoError("poll");
    }
    if (cancel_fd >= 0 && fds[1].revents != 0) {
      return Wait::kCancelled;
    }
    if (fds[0].revents != 0) {
      return Wait::kReady;
    }
  }
}

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
  SockAddr sa = ToSockAddr(address, port);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa.storage), sa.len) == 0) {
    return fd;
  }
  if (errno != EINPROGRESS && errno != EINTR) {
    return base::ErrnoError("connect");
  }
  ABOX_ASSIGN_OR_RETURN(Wait wait, PollUntil(fd.get(), POLLOUT, deadline, cancel_fd));
  if (wait == Wait::kCancelled) {
    return absl::CancelledError("connect cancelled (proxy shutting down)");
  }
  if (wait == Wait::kTimeout) {
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

// Closes with an RST rather than a FIN: the upstream must not take an aborted stream for a
// complete one.
void AbortSocket(int fd) {
  linger lin{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
  ::shutdown(fd, SHUT_RDWR);
}

// State shared by the two directions of one splice.
class SpliceState {
 public:
  SpliceState(TunnelStream& guest, int fd, absl::Duration idle)
      : guest_(guest), fd_(fd), idle_(idle), last_activity_ns_(absl::ToUnixNanos(absl::Now())) {}

  void Touch() { last_activity_ns_.store(absl::ToUnixNanos(absl::Now())); }
  absl::Time IdleDeadline() const {
    absl::Duration idle = refusing_.load() ? std::min(idle_, kRefusalDrainTime) : idle_;
    return absl::FromUnixNanos(last_activity_ns_.load()) + idle;
  }
  // True when the wait that expired at `IdleDeadline()` really found both sides quiet.
  bool IsIdle() const { return absl::Now() >= IdleDeadline(); }

  // First caller wins: records why, resets the guest and the upstream (unblocks the other
  // direction).
  void Abort(std::string why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) {
        return;
      }
      aborted_ = true;
      why_ = std::move(why);
    }
    guest_.Reset(why_);
    AbortSocket(fd_);
  }
  bool aborted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return aborted_;
  }
  std::string why() const {
    std::lock_guard<std::mutex> lock(mu_);
    return why_;
  }

  // The filter refused guest bytes: `reply` goes to the guest once the upstream has finished
  // (see CloseGuest), and the idle timeout becomes kRefusalDrainTime.
  void Refuse(absl::Status why, std::string reply) {
    std::lock_guard<std::mutex> lock(mu_);
    refused_ = std::move(why);
    reply_ = std::move(reply);
    refusing_.store(true);
    Touch();
  }
  absl::Status refused() const {
    std::lock_guard<std::mutex> lock(mu_);
    return refused_;
  }
  // Upstream EOF: the refusal's reply (if any) and then EOF to the guest.
  void CloseGuest() {
    std::string reply;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reply = std::move(reply_);
      reply_.clear();
    }
    if (!reply.empty() && guest_.Write(reply).ok()) {
      bytes_down += reply.size();
    }
    guest_.CloseWrite();
  }

  TunnelStream& guest() { return guest_; }
  int fd() const { return fd_; }
  absl::Duration idle() const { return idle_; }

  std::atomic<uint64_t> bytes_up{0};
  std::atomic<uint64_t> bytes_down{0};

 private:
  TunnelStream& guest_;
  const int fd_;
  const absl::Duration idle_;
  std::atomic<int64_t> last_activity_ns_;
  std::atomic<bool> refusing_{false};
  mutable std::mutex mu_;
  bool aborted_ = false;
  std::string why_;
  absl::Status refused_;
  std::string reply_;
};

std::string IdleText(absl::Duration idle) {
  return absl::StrCat("idle for ", absl::FormatDuration(idle));
}

// upstream -> guest, until upstream EOF (passed on as CloseWrite) or an abort.
void CopyDown(SpliceState& s, int cancel_fd) {
  std::string buf(kChunk, '\0');
  for (;;) {
    // Re-armed each second: a refusal on the other direction shortens the idle deadline.
    absl::StatusOr<Wait> wait = PollUntil(
        s.fd(), POLLIN, std::min(s.IdleDeadline(), absl::Now() + absl::Seconds(1)), cancel_fd);
    if (!wait.ok()) {
      s.Abort(absl::StrCat("upstream: ", wait.status().message()));
      return;
    }
    if (*wait == Wait::kCancelled) {
      s.Abort("proxy shutting down");
      return;
    }
    if (*wait == Wait::kTimeout) {
      if (s.IsIdle()) {
        s.Abort(IdleText(s.idle()));
        return;
      }
      continue;
    }
    ssize_t n = ::recv(s.fd(), buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) {
        continue;
      }
      s.Abort(absl::StrCat("upstream: ", base::ErrnoError("recv").message()));
      return;
    }
    if (s.aborted()) {
      return;
    }
    if (n == 0) {
      s.CloseGuest();
      return;
    }
    absl::Status written = s.guest().Write(absl::string_view(buf.data(), static_cast<size_t>(n)));
    if (!written.ok()) {
      s.Abort(absl::StrCat("guest: ", written.message()));
      return;
    }
    s.bytes_down += static_cast<uint64_t>(n);
    s.Touch();
  }
}

// Sends guest bytes upstream, through the filter when there is one. False when the filter
// refused them (what it let through is sent, then the upstream's write side closed) or the
// send failed (aborted).
bool SendUp(SpliceState& s, const SpliceOptions& options, absl::string_view data) {
  std::string filtered;
  absl::Status verdict;
  if (options.filter_up) {
    verdict = options.filter_up(data, &filtered);
    data = filtered;
    if (!verdict.ok()) {
      s.Refuse(verdict, options.refusal_reply ? options.refusal_reply(verdict) : "");
    }
  }
  absl::Status sent = SendAll(s.fd(), data, s.IdleDeadline(), options.cancel_fd);
  if (!sent.ok()) {
    s.Abort(absl::StrCat("upstream: ", sent.message()));
    return false;
  }
  s.bytes_up += data.size();
  if (!verdict.ok()) {
    ::shutdown(s.fd(), SHUT_WR);
    return false;
  }
  return true;
}

// guest -> upstream, until guest EOF (passed on as shutdown(SHUT_WR)), a refusal or an abort.
// Returns true on EOF.
bool CopyUp(SpliceState& s, const SpliceOptions& options) {
  std::string buf(kChunk, '\0');
  for (;;) {
    absl::StatusOr<size_t> n = s.guest().Read(buf.data(), buf.size(), s.IdleDeadline());
    if (!n.ok()) {
      if (absl::IsDeadlineExceeded(n.status())) {
        if (s.IsIdle()) {
          s.Abort(IdleText(s.idle()));
          return false;
        }
        continue;
      }
      s.Abort(absl::StrCat("guest: ", n.status().message()));
      return false;
    }
    if (*n == 0) {
      ::shutdown(s.fd(), SHUT_WR);
      return true;
    }
    if (!SendUp(s, options, absl::string_view(buf.data(), *n))) {
      return false;
    }
    s.Touch();
  }
}

}  // namespace

absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline, int cancel_fd) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno != EAGAIN) {
      return base::ErrnoError("send");
    }
    ABOX_ASSIGN_OR_RETURN(Wait wait, PollUntil(fd, POLLOUT, deadline, cancel_fd));
    if (wait == Wait::kCancelled) {
      return absl::CancelledError("proxy shutting down");
    }
    if (wait == Wait::kTimeout) {
      return absl::DeadlineExceededError("send timed out (peer not reading)");
    }
  }
  return absl::OkStatus();
}

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
  SpliceState state(guest, upstream.get(), options.idle_timeout);
  SpliceResult result;
  bool go_on = SendUp(state, options, options.first_up);
  if (state.aborted()) {
    result.ended = state.why();
    return result;
  }
  std::thread down([&state, &options] { CopyDown(state, options.cancel_fd); });
  bool up_clean = go_on && CopyUp(state, options);
  down.join();
  result.bytes_up = state.bytes_up.load();
  result.bytes_down = state.bytes_down.load();
  result.refused = state.refused();
  result.clean = up_clean && !state.aborted();
  result.ended = state.aborted()        ? state.why()
                 : !result.refused.ok() ? std::string(result.refused.message())
                                        : "closed";
  return result;
}

}  // namespace abox::net
