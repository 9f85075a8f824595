// The agent's byte stream to the host: discovery of the virtio-serial port in the VM, and a
// non-blocking channel with a bounded, prioritised outgoing queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/base/unique_fd.h"
#include "src/proto/frame.h"

namespace abox::guest {

// The name QEMU gives the agent's port (`-device virtserialport,name=...`).
inline constexpr char kAgentPortName[] = "org.abox.agent.0";

// Scans `<sysfs_dir>/*/name` for `port_name` and returns "<dev_dir>/<entry>" (e.g.
// /dev/vport0p1), or nullopt when the port does not exist (yet).
std::optional<std::string> FindAgentPort(const std::string& sysfs_dir = "/sys/class/virtio-ports",
                                         absl::string_view port_name = kAgentPortName,
                                         const std::string& dev_dir = "/dev");

enum class ChannelKind {
  // A socket or pipe: reading 0 bytes means the host is gone for good.
  kStream,
  // A virtio-serial port: reading 0 bytes means no host is connected right now; one may
  // connect later (the daemon restarts, reconnects). Writes wait until a host is connected.
  kVirtioPort,
};

// Owns the channel fd (non-blocking, close-on-exec). Outgoing frames are queued: frames on the
// control stream and credit grants jump ahead of queued stream frames (at frame boundaries), so
// pongs and credits are not stuck behind bulk output; stream frames keep their order (a
// stream's data, EOF and exit). Not thread-safe.
class Channel final {
 public:
  // Takes `fd`, makes it non-blocking and close-on-exec.
  [[nodiscard]] static absl::StatusOr<Channel> Adopt(base::UniqueFd fd, ChannelKind kind);

  Channel(Channel&&) = default;
  Channel& operator=(Channel&&) = default;

  [[nodiscard]] int fd() const { return fd_.get(); }
  [[nodiscard]] ChannelKind kind() const { return kind_; }

  // One read(). 0: end of stream / no host connected. kUnavailable: nothing to read now.
  // Other errors: the channel is broken.
  [[nodiscard]] absl::StatusOr<size_t> Read(char* buf, size_t len);

  // Queues one frame for the host.
  void Send(proto::FrameType type, uint32_t stream, uint8_t flags, absl::string_view payload);
  // Writes as much as the fd accepts without blocking. An error means the host is gone.
  [[nodiscard]] absl::Status Flush();
  // Forgets everything unsent (the host that was meant to read it is gone).
  void DropPending();
  // Closes the fd: a stream peer sees end of stream.
  void Close();

  // Unsent bytes, all of them / those of control frames and credits only.
  [[nodiscard]] size_t pending() const {
    return current_.size() - current_off_ + control_.size() + queued_stream_bytes_;
  }
  [[nodiscard]] size_t pending_control() const { return control_.size(); }

 private:
  Channel(base::UniqueFd fd, ChannelKind kind) : fd_(std::move(fd)), kind_(kind) {}
  // Moves queued frames into current_: control first, then stream frames up to a batch size.
  void Refill();

  base::UniqueFd fd_;
  ChannelKind kind_;
  std::string current_;  // whole frames being written
  size_t current_off_ = 0;
  std::string control_;  // whole control frames and credits, written before stream frames
  std::deque<std::string> stream_frames_;
  size_t queued_stream_bytes_ = 0;
};

}  // namespace abox::guest
