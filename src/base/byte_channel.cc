#include "src/base/byte_channel.h"

#include <algorithm>

namespace abox::base {

absl::Status ByteChannel::Write(absl::string_view data) {
  std::unique_lock lock(mu_);
  while (!data.empty()) {
    cv_.wait(lock, [&] { return read_closed_ || buffer_.size() - head_ < capacity_; });
    if (read_closed_) {
      return absl::AbortedError("the reader of the stream stopped");
    }
    if (head_ > 0) {  // compact: what was read goes
      buffer_.erase(0, head_);
      head_ = 0;
    }
    size_t n = std::min(data.size(), capacity_ - buffer_.size());
    buffer_.append(data.data(), n);
    data.remove_prefix(n);
    cv_.notify_all();
  }
  return absl::OkStatus();
}

void ByteChannel::CloseWrite() {
  std::lock_guard lock(mu_);
  write_closed_ = true;
  cv_.notify_all();
}

absl::StatusOr<size_t> ByteChannel::Read(char* buf, size_t len) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return read_closed_ || write_closed_ || buffer_.size() > head_; });
  if (read_closed_) {
    return absl::FailedPreconditionError("read after CloseRead");
  }
  size_t n = std::min(len, buffer_.size() - head_);
  std::copy_n(buffer_.data() + head_, n, buf);
  head_ += n;
  if (head_ == buffer_.size()) {
    buffer_.clear();
    head_ = 0;
  }
  cv_.notify_all();
  return n;
}

void ByteChannel::CloseRead() {
  std::lock_guard lock(mu_);
  read_closed_ = true;
  buffer_.clear();
  head_ = 0;
  cv_.notify_all();
}

}  // namespace abox::base
