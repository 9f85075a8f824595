// SHA-256 for workspace content (nettle: small enough to link into the static guest agent, so
// host and guest hash with the same code).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::workspace {

// Incremental hasher; Finish() returns 64 lowercase hex digits.
class Sha256 final {
 public:
  Sha256();
  void Update(absl::string_view data);
  std::string Finish();

 private:
  alignas(16) unsigned char state_[128];  // struct sha256_ctx, kept opaque to callers
};

std::string Sha256Hex(absl::string_view data);

// Hashes an open file from its current offset to EOF (retrying EINTR); `size` gets the byte
// count when not null.
absl::StatusOr<std::string> Sha256Fd(int fd, uint64_t* size = nullptr);

// True for 64 lowercase hex digits.
bool IsSha256Hex(absl::string_view s);

}  // namespace abox::workspace
