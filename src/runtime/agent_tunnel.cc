#include "src/runtime/agent_tunnel.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace abox::runtime {

AgentTunnel::AgentTunnel(std::shared_ptr<internal::AgentCore> core, uint32_t stream,
                         net::TunnelInfo info)
    : core_(std::move(core)), stream_(stream), info_(std::move(info)) {}

AgentTunnel::~AgentTunnel() {
  std::lock_guard lock(core_->mu);
  if (!ended_) {
    // A no-op when both halves are closed already; otherwise the guest's program sees a reset
    // and the session stops calling this sink.
    core_->session.ResetTunnel(stream_, "the host closed the tunnel");
    core_->Wake();
  }
}

void AgentTunnel::OnData(absl::string_view data) {
  if (inbox_off_ == inbox_.size()) {
    inbox_.clear();
    inbox_off_ = 0;
  }
  inbox_.append(data.data(), data.size());
  core_->cv.notify_all();
}

void AgentTunnel::OnEof() {
  guest_eof_ = true;
  core_->cv.notify_all();
}

void AgentTunnel::OnReset(absl::string_view error) {
  if (!ended_) {
    ended_ = absl::UnavailableError(absl::StrCat("tunnel reset by the guest side: ", error));
  }
  core_->cv.notify_all();
}

absl::StatusOr<size_t> AgentTunnel::Read(char* buf, size_t len, absl::Time deadline) {
  if (len == 0) {
    return absl::InvalidArgumentError("AgentTunnel::Read: empty buffer");
  }
  std::unique_lock lock(core_->mu);
  auto ready = [&] { return ended_ || inbox_off_ < inbox_.size() || guest_eof_; };
  if (deadline == absl::InfiniteFuture()) {
    core_->cv.wait(lock, ready);
  } else if (!core_->cv.wait_until(lock, absl::ToChronoTime(deadline), ready)) {
    return absl::DeadlineExceededError("no data from the guest before the deadline");
  }
  if (ended_) {
    return *ended_;  // Like a TCP reset: what was buffered is dropped.
  }
  if (inbox_off_ == inbox_.size()) {
    return 0;  // guest_eof_
  }
  size_t n = std::min(len, inbox_.size() - inbox_off_);
  std::memcpy(buf, inbox_.data() + inbox_off_, n);
  inbox_off_ += n;
  if (inbox_off_ == inbox_.size()) {
    inbox_.clear();
    inbox_off_ = 0;
  } else if (inbox_off_ > inbox_.size() / 2) {
    inbox_.erase(0, inbox_off_);
    inbox_off_ = 0;
  }
  // The bytes have left our buffer: the guest may send that many more.
  core_->session.ConsumedTunnel(stream_, n);
  if (core_->session.PendingOutput() > 0) {
    core_->Wake();
  }
  return n;
}

absl::Status AgentTunnel::Write(absl::string_view data) {
  while (!data.empty()) {
    std::unique_lock lock(core_->mu);
    core_->cv.wait(
        lock, [&] { return ended_ || write_closed_ || core_->session.TunnelCredit(stream_) > 0; });
    if (ended_) {
      return *ended_;
    }
    if (write_closed_) {
      return absl::FailedPreconditionError("AgentTunnel::Write after CloseWrite");
    }
    data.remove_prefix(core_->session.SendTunnel(stream_, data));
    core_->Wake();
  }
  return absl::OkStatus();
}

void AgentTunnel::CloseWrite() {
  std::lock_guard lock(core_->mu);
  if (ended_ || write_closed_) {
    return;
  }
  write_closed_ = true;
  core_->session.CloseTunnel(stream_);
  core_->cv.notify_all();
  core_->Wake();
}

void AgentTunnel::Reset(absl::string_view reason) {
  std::lock_guard lock(core_->mu);
  if (ended_) {
    return;
  }
  ended_ = absl::CancelledError(absl::StrCat("tunnel reset by the host: ", reason));
  core_->session.ResetTunnel(stream_, reason);
  core_->cv.notify_all();
  core_->Wake();
}

}  // namespace abox::runtime
