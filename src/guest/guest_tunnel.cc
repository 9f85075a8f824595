#include "src/guest/guest_tunnel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/guest/log.h"

namespace abox::guest {

using proto::FrameType;

void SendTunnelOpen(uint32_t id, const proto::TunnelRequest& request, FrameSink& sink) {
  sink.Send(FrameType::kTunnelOpen, id, 0, proto::EncodeTunnelRequest(request));
}

void CloseWithReset(base::UniqueFd& fd) {
  if (!fd) {
    return;
  }
  // A zero linger time makes close() send RST and drop unsent data.
  struct linger lg {
    1, 0
  };
  ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  fd.reset();
}

SpliceTunnel::SpliceTunnel(uint32_t id, base::UniqueFd socket, const proto::TunnelRequest& request,
                           uint32_t send_window, uint32_t max_payload, FrameSink& sink)
    : GuestTunnel(id),
      socket_(std::move(socket)),
      max_payload_(std::min(max_payload, proto::kMaxPayload)),
      send_(send_window),
      recv_(proto::kDefaultWindow) {
  SendTunnelOpen(id, request, sink);
}

pollfd SpliceTunnel::PollFor(bool may_send) const {
  short events = 0;
  if (!local_eof_ && may_send && send_.Available() > 0) {
    events |= POLLIN;
  }
  if (inbox_off_ < inbox_.size()) {
    events |= POLLOUT;
  }
  // With no events, leave the fd out: poll would still report POLLHUP and spin.
  if (done_ || events == 0) {
    return {-1, 0, 0};
  }
  return {socket_.get(), events, 0};
}

void SpliceTunnel::OnPollReady(short revents, char* scratch, FrameSink& sink) {
  if (done_) {
    return;
  }
  if ((revents & POLLOUT) != 0 ||
      ((revents & (POLLHUP | POLLERR)) != 0 && inbox_off_ < inbox_.size())) {
    WriteLocal(sink);
  }
  if (!done_ && !local_eof_ && (revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
    ReadLocal(scratch, sink);
  }
  MaybeFinish();
}

void SpliceTunnel::ReadLocal(char* scratch, FrameSink& sink) {
  uint32_t want = std::min(send_.Available(), max_payload_);
  if (want == 0) {
    return;
  }
  ssize_t n;
  do {
    n = ::read(socket_.get(), scratch, want);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    send_.Consume(static_cast<uint32_t>(n));
    sink.Send(FrameType::kTunnelData, id(), 0, absl::string_view(scratch, static_cast<size_t>(n)));
    return;
  }
  if (n == 0) {
    local_eof_ = true;
    sink.Send(FrameType::kTunnelData, id(), proto::kFlagEof, "");
    return;
  }
  if (errno == EAGAIN) {
    return;
  }
  Fail(absl::StrCat("the guest program's connection failed: ", ErrnoText(errno)), sink);
}

void SpliceTunnel::WriteLocal(FrameSink& sink) {
  auto grant = [&](size_t n) {
    if (uint32_t credit = recv_.Release(static_cast<uint32_t>(n)); credit > 0) {
      sink.Send(FrameType::kCredit, id(), 0, proto::EncodeCredit(credit));
    }
  };
  while (inbox_off_ < inbox_.size()) {
    ssize_t n = ::send(socket_.get(), inbox_.data() + inbox_off_, inbox_.size() - inbox_off_,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      inbox_off_ += static_cast<size_t>(n);
      grant(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && errno == EAGAIN) {
      break;
    }
    // EPIPE / ECONNRESET: the program is gone; the host's connection must not linger.
    Fail(absl::StrCat("the guest program's connection failed: ", ErrnoText(n < 0 ? errno : EPIPE)),
         sink);
    return;
  }
  if (inbox_off_ == inbox_.size()) {
    inbox_.clear();
    inbox_off_ = 0;
  } else if (inbox_off_ > inbox_.size() / 2) {
    inbox_.erase(0, inbox_off_);
    inbox_off_ = 0;
  }
  if (host_eof_ && inbox_.empty() && !shut_wr_) {
    shut_wr_ = true;
    ::shutdown(socket_.get(), SHUT_WR);  // The program reads EOF.
  }
}

absl::Status SpliceTunnel::OnData(absl::string_view data, bool eof, FrameSink& sink) {
  if (host_eof_) {
    return absl::InvalidArgumentError(absl::StrCat("tunnel_data on stream ", id(), " after EOF"));
  }
  ABOX_RETURN_IF_ERROR(base::Annotate(recv_.OnReceived(static_cast<uint32_t>(data.size())),
                                      absl::StrCat("tunnel_data on stream ", id())));
  host_eof_ = eof;
  if (done_) {
    return absl::OkStatus();
  }
  inbox_.append(data.data(), data.size());
  WriteLocal(sink);  // Most of the time the socket takes it at once.
  MaybeFinish();
  return absl::OkStatus();
}

absl::Status SpliceTunnel::OnCredit(uint32_t bytes) {
  return base::Annotate(send_.Grant(bytes), absl::StrCat("credit on tunnel ", id()));
}

void SpliceTunnel::OnReset(absl::string_view error) {
  (void)error;  // The program sees ECONNRESET; the reason is the host's to log.
  CloseWithReset(socket_);
  done_ = true;
}

void SpliceTunnel::Abort() {
  CloseWithReset(socket_);
  done_ = true;
}

void SpliceTunnel::Fail(absl::string_view why, FrameSink& sink) {
  sink.Send(FrameType::kReset, id(), 0, proto::EncodeError(why));
  CloseWithReset(socket_);
  done_ = true;
}

void SpliceTunnel::MaybeFinish() {
  if (!done_ && local_eof_ && shut_wr_) {
    socket_.reset();  // Both directions ended in order: a normal close.
    done_ = true;
  }
}

}  // namespace abox::guest
