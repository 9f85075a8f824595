// Host <-> guest framing (see docs/protocol.md). One byte stream carries frames:
//
//   u32 length | u32 stream | u8 type | u8 flags | u16 reserved (0)   (little endian, 12 bytes)
//   followed by `length` payload bytes (length <= kMaxPayload).
//
// Shared by host and guest. The host treats every byte from the guest as hostile: the decoder
// bounds its buffer, validates every header field and never allocates more than one frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::proto {

// Version 2 added guest-opened tunnel streams (egress). Version 1 is not spoken any more: an
// image records the protocol of its agent and is refused unless it matches, so an old image is
// rebuilt (`abox image build --force`) rather than run without egress.
inline constexpr uint32_t kProtocolVersion = 2;
inline constexpr uint32_t kMinProtocolVersion = 2;
inline constexpr size_t kHeaderSize = 12;
// Largest payload of one frame. Keeps a single frame from monopolising the channel.
inline constexpr uint32_t kMaxPayload = 64 * 1024;
// Bytes a sender may have in flight per stream and direction before it needs credit.
inline constexpr uint32_t kDefaultWindow = 256 * 1024;
// Exec streams open at once on one connection (bounds the receiver's memory).
inline constexpr uint32_t kMaxStreams = 256;
// Tunnel streams open at once on one connection. Beyond it the host resets new tunnels ("too
// many tunnels"), which is not a violation: a guest opening thousands stays bounded and alive.
inline constexpr uint32_t kMaxTunnels = 256;
// Stream 0 is the control stream; exec streams are opened by the host with odd ids, tunnel
// streams by the guest with even ids (both strictly increasing).
inline constexpr uint32_t kControlStream = 0;

enum class FrameType : uint8_t {
  kHello = 1,      // control: JSON Hello, host first, guest answers
  kPing = 2,       // control: opaque bytes (<= 64) echoed in kPong
  kPong = 3,       // control
  kOpen = 4,       // host->guest: opens stream N, payload JSON ExecRequest
  kStdin = 5,      // host->guest: data; kFlagEof closes stdin
  kStdout = 6,     // guest->host: data; kFlagEof when the command's stdout closed
  kStderr = 7,     // guest->host: data; kFlagEof when the command's stderr closed
  kCredit = 8,     // either way: u32 LE bytes added to the peer's send window on this stream
  kSignal = 9,     // host->guest: JSON {"signal": N} for the command's process group
  kResize = 10,    // host->guest: JSON {"rows": R, "cols": C} (PTY)
  kExit = 11,      // guest->host: JSON ExitInfo; the last frame of a stream
  kReset = 12,     // either way: JSON {"error": "..."}; aborts the stream
  kShutdown = 13,  // host->guest, control: sync disks and power off
  kGoodbye = 14,   // either way, control: JSON {"error": "..."} sent before closing on a violation
  kTunnelOpen = 15,  // guest->host: opens even stream N, payload JSON TunnelRequest (v2)
  kTunnelData = 16,  // either way: tunnel bytes; kFlagEof = the sender closed its write half (v2)
};
inline constexpr uint8_t kMaxFrameType = 16;

// EOF on data frames (stdin, stdout, stderr, tunnel_data).
inline constexpr uint8_t kFlagEof = 0x1;

struct FrameHeader {
  uint32_t length = 0;
  uint32_t stream = 0;
  FrameType type = FrameType::kHello;
  uint8_t flags = 0;
};

struct Frame {
  FrameHeader header;
  std::string payload;
};

// Name of a frame type for logs ("stdout"), or "unknown(N)".
std::string FrameTypeName(uint8_t type);

// Appends one encoded frame to `out`. CHECKs payload.size() <= kMaxPayload (a local bug).
void AppendFrame(FrameType type, uint32_t stream, uint8_t flags, absl::string_view payload,
                 std::string* out);
std::string EncodeFrame(FrameType type, uint32_t stream, uint8_t flags, absl::string_view payload);

// Validates a header received from the peer: known type, reserved bits zero, flags only where
// defined, length <= kMaxPayload, control frames on stream 0 and data frames off it.
[[nodiscard]] absl::StatusOr<FrameHeader> ParseHeader(const char (&bytes)[kHeaderSize]);

// Incremental decoder. Holds at most one partial frame (<= kHeaderSize + kMaxPayload bytes).
// Not thread-safe.
class FrameDecoder final {
 public:
  // Appends bytes and returns how many were consumed; stops consuming once a full frame is
  // buffered, so the caller must drain Next() and feed the rest again.
  size_t Feed(absl::string_view data);
  // The next complete frame, nullopt if more bytes are needed, or an error for a bad header
  // (after which the connection must be dropped).
  [[nodiscard]] absl::StatusOr<std::optional<Frame>> Next();
  // Bytes buffered towards an incomplete frame.
  [[nodiscard]] size_t buffered() const { return header_fill_ + payload_.size(); }

 private:
  char header_bytes_[kHeaderSize] = {};
  size_t header_fill_ = 0;
  std::optional<FrameHeader> header_;
  std::string payload_;
  bool complete_ = false;
  absl::Status error_;
};

// Encodes / decodes the 4-byte credit payload.
std::string EncodeCredit(uint32_t bytes);
[[nodiscard]] absl::StatusOr<uint32_t> DecodeCredit(absl::string_view payload);

// Send/receive window accounting for one stream direction.
//  - The sender calls Consume(n) before sending n bytes; it may only send Available() bytes.
//  - The receiver calls OnReceived(n) for incoming data (an error when the peer overran the
//    window) and Release(n) once the data left its buffers; Release returns the credit to
//    grant back (batched: nothing until at least half a window is releasable).
class CreditWindow final {
 public:
  explicit CreditWindow(uint32_t window = kDefaultWindow) : window_(window), available_(window) {}
  // Sender side.
  [[nodiscard]] uint32_t Available() const { return available_; }
  void Consume(uint32_t n);
  [[nodiscard]] absl::Status Grant(uint32_t n);  // credit from the peer
  // Receiver side.
  [[nodiscard]] absl::Status OnReceived(uint32_t n);
  [[nodiscard]] uint32_t Release(uint32_t n);
  [[nodiscard]] uint32_t Outstanding() const { return outstanding_; }

 private:
  uint32_t window_;
  uint32_t available_;        // sender: bytes we may still send
  uint32_t outstanding_ = 0;  // receiver: bytes received and not yet released
  uint32_t releasable_ = 0;   // receiver: released but not yet granted back
};

}  // namespace abox::proto
