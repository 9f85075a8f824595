#include "src/proto/frame.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace abox::proto {
namespace {

void PutU32(uint32_t v, char* p) {
  for (int i = 0; i < 4; ++i) {
    p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  }
  return v;
}

bool IsControl(FrameType t) {
  return t == FrameType::kHello || t == FrameType::kPing || t == FrameType::kPong ||
         t == FrameType::kShutdown || t == FrameType::kGoodbye;
}

bool IsData(FrameType t) {
  return t == FrameType::kStdin || t == FrameType::kStdout || t == FrameType::kStderr ||
         t == FrameType::kTunnelData;
}

}  // namespace

std::string FrameTypeName(uint8_t type) {
  static constexpr const char* kNames[] = {
      "",       "hello",    "ping",    "pong",        "open",       "stdin",
      "stdout", "stderr",   "credit",  "signal",      "resize",     "exit",
      "reset",  "shutdown", "goodbye", "tunnel_open", "tunnel_data"};
  if (type >= 1 && type <= kMaxFrameType) {
    return kNames[type];
  }
  return absl::StrCat("unknown(", type, ")");
}

void AppendFrame(FrameType type, uint32_t stream, uint8_t flags, absl::string_view payload,
                 std::string* out) {
  if (payload.size() > kMaxPayload) {
    std::abort();  // A local bug: callers split data into kMaxPayload chunks.
  }
  char header[kHeaderSize];
  PutU32(static_cast<uint32_t>(payload.size()), header);
  PutU32(stream, header + 4);
  header[8] = static_cast<char>(type);
  header[9] = static_cast<char>(flags);
  header[10] = 0;
  header[11] = 0;
  out->append(header, kHeaderSize);
  out->append(payload.data(), payload.size());
}

std::string EncodeFrame(FrameType type, uint32_t stream, uint8_t flags, absl::string_view payload) {
  std::string out;
  AppendFrame(type, stream, flags, payload, &out);
  return out;
}

absl::StatusOr<FrameHeader> ParseHeader(const char (&bytes)[kHeaderSize]) {
  FrameHeader h;
  h.length = GetU32(bytes);
  h.stream = GetU32(bytes + 4);
  uint8_t type = static_cast<uint8_t>(bytes[8]);
  h.flags = static_cast<uint8_t>(bytes[9]);
  if (bytes[10] != 0 || bytes[11] != 0) {
    return absl::InvalidArgumentError("frame header: reserved bytes are not zero");
  }
  if (type == 0 || type > kMaxFrameType) {
    return absl::InvalidArgumentError(absl::StrCat("frame header: unknown type ", type));
  }
  h.type = static_cast<FrameType>(type);
  if (h.length > kMaxPayload) {
    return absl::InvalidArgumentError(absl::StrCat("frame header: ", FrameTypeName(type),
                                                   " length ", h.length, " exceeds the maximum ",
                                                   kMaxPayload));
  }
  if (IsControl(h.type) != (h.stream == kControlStream)) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame header: ", FrameTypeName(type), " frame on stream ", h.stream));
  }
  if ((h.flags & ~kFlagEof) != 0 || (h.flags != 0 && !IsData(h.type))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame header: invalid flags 0x", absl::Hex(h.flags), " on ", FrameTypeName(type)));
  }
  return h;
}

size_t FrameDecoder::Feed(absl::string_view data) {
  size_t used = 0;
  while (!complete_ && error_.ok() && used < data.size()) {
    if (!header_) {
      size_t n = std::min(kHeaderSize - header_fill_, data.size() - used);
      std::memcpy(header_bytes_ + header_fill_, data.data() + used, n);
      header_fill_ += n;
      used += n;
      if (header_fill_ < kHeaderSize) {
        break;
      }
      auto h = ParseHeader(header_bytes_);
      if (!h.ok()) {
        error_ = h.status();
        break;
      }
      header_ = *h;
      payload_.clear();
      payload_.reserve(h->length);
    }
    size_t want = header_->length - payload_.size();
    size_t n = std::min(want, data.size() - used);
    payload_.append(data.data() + used, n);
    used += n;
    if (payload_.size() == header_->length) {
      complete_ = true;
    }
  }
  return used;
}

absl::StatusOr<std::optional<Frame>> FrameDecoder::Next() {
  if (!error_.ok()) {
    return error_;
  }
  if (!complete_) {
    return std::nullopt;
  }
  Frame f{*header_, std::move(payload_)};
  payload_ = std::string();
  header_.reset();
  header_fill_ = 0;
  complete_ = false;
  return f;
}

std::string EncodeCredit(uint32_t bytes) {
  std::string s(4, '\0');
  PutU32(bytes, s.data());
  return s;
}

absl::StatusOr<uint32_t> DecodeCredit(absl::string_view payload) {
  if (payload.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("credit payload of ", payload.size(), " bytes, want 4"));
  }
  return GetU32(payload.data());
}

void CreditWindow::Consume(uint32_t n) {
  if (n > available_) {
    std::abort();  // Local bug: callers check Available() first.
  }
  available_ -= n;
}

absl::Status CreditWindow::Grant(uint32_t n) {
  if (static_cast<uint64_t>(available_) + n > window_) {
    return absl::InvalidArgumentError(
        absl::StrCat("credit grant of ", n, " bytes overflows the ", window_, "-byte window"));
  }
  available_ += n;
  return absl::OkStatus();
}

absl::Status CreditWindow::OnReceived(uint32_t n) {
  if (static_cast<uint64_t>(outstanding_) + releasable_ + n > window_) {
    return absl::ResourceExhaustedError(absl::StrCat("peer sent ", n, " bytes with only ",
                                                     window_ - outstanding_ - releasable_,
                                                     " bytes of credit (window ", window_, ")"));
  }
  outstanding_ += n;
  return absl::OkStatus();
}

uint32_t CreditWindow::Release(uint32_t n) {
  n = std::min(n, outstanding_);
  outstanding_ -= n;
  releasable_ += n;
  if (releasable_ >= window_ / 2 || outstanding_ == 0) {
    return std::exchange(releasable_, 0);
  }
  return 0;
}

}  // namespace abox::proto
