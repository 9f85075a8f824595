#include "src/guest/channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::guest {
namespace {

// Stream frames moved into one write batch: bounds how long a control frame queued right
// after a refill waits behind bulk data.
constexpr size_t kWriteBatch = size_t{256} << 10;

}  // namespace

std::optional<std::string> FindAgentPort(const std::string& sysfs_dir, absl::string_view port_name,
                                         const std::string& dev_dir) {
  DIR* dir = ::opendir(sysfs_dir.c_str());
  if (dir == nullptr) {
    return std::nullopt;
  }
  std::optional<std::string> found;
  // readdir is not thread-safe on a shared DIR*; this one is local.
  while (struct dirent* entry = ::readdir(dir)) {  // NOLINT(concurrency-mt-unsafe)
    std::string entry_name = entry->d_name;
    if (entry_name == "." || entry_name == "..") {
      continue;
    }
    auto name = base::ReadFile(absl::StrCat(sysfs_dir, "/", entry_name, "/name"), 4096);
    if (name.ok() && absl::StripTrailingAsciiWhitespace(*name) == port_name) {
      found = absl::StrCat(dev_dir, "/", entry_name);
      break;
    }
  }
  ::closedir(dir);
  return found;
}

absl::StatusOr<Channel> Channel::Adopt(base::UniqueFd fd, ChannelKind kind) {
  if (!fd) {
    return absl::InvalidArgumentError("channel: invalid fd");
  }
  int flags = ::fcntl(fd.get(), F_GETFD);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFD, flags | FD_CLOEXEC) != 0) {
    return base::ErrnoError("fcntl(channel, FD_CLOEXEC)");
  }
  ABOX_RETURN_IF_ERROR(base::SetNonBlocking(fd.get()));
  return Channel(std::move(fd), kind);
}

absl::StatusOr<size_t> Channel::Read(char* buf, size_t len) {
  return base::ReadSome(fd_.get(), buf, len);
}

void Channel::Send(proto::FrameType type, uint32_t stream, uint8_t flags,
                   absl::string_view payload) {
  if (stream == proto::kControlStream || type == proto::FrameType::kCredit) {
    proto::AppendFrame(type, stream, flags, payload, &control_);
    return;
  }
  std::string frame;
  proto::AppendFrame(type, stream, flags, payload, &frame);
  queued_stream_bytes_ += frame.size();
  stream_frames_.push_back(std::move(frame));
}

void Channel::Refill() {
  current_.clear();
  current_off_ = 0;
  current_.swap(control_);
  while (!stream_frames_.empty() && current_.size() < kWriteBatch) {
    queued_stream_bytes_ -= stream_frames_.front().size();
    current_.append(stream_frames_.front());
    stream_frames_.pop_front();
  }
}

absl::Status Channel::Flush() {
  for (;;) {
    if (current_off_ == current_.size()) {
      Refill();
      if (current_.empty()) {
        return absl::OkStatus();
      }
    }
    ssize_t n = ::write(fd_.get(), current_.data() + current_off_, current_.size() - current_off_);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        return absl::OkStatus();
      }
      return base::ErrnoError("write(channel)");
    }
    current_off_ += static_cast<size_t>(n);
  }
}

void Channel::Close() {
  DropPending();
  fd_.reset();
}

void Channel::DropPending() {
  current_.clear();
  current_off_ = 0;
  control_.clear();
  stream_frames_.clear();
  queued_stream_bytes_ = 0;
}

}  // namespace abox::guest
