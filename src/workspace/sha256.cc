#include "src/workspace/sha256.h"

#include <nettle/sha2.h>
#include <unistd.h>

#include <cerrno>

#include "src/base/status_macros.h"

namespace abox::workspace {
namespace {

sha256_ctx* Ctx(unsigned char* state) { return reinterpret_cast<sha256_ctx*>(state); }

}  // namespace

static_assert(sizeof(sha256_ctx) <= 128, "Sha256::state_ too small");

Sha256::Sha256() { sha256_init(Ctx(state_)); }

void Sha256::Update(absl::string_view data) {
  sha256_update(Ctx(state_), data.size(), reinterpret_cast<const uint8_t*>(data.data()));
}

std::string Sha256::Finish() {
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(Ctx(state_), sizeof(digest), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * sizeof(digest), '0');
  for (size_t i = 0; i < sizeof(digest); ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return out;
}

std::string Sha256Hex(absl::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.Finish();
}

absl::StatusOr<std::string> Sha256Fd(int fd, uint64_t* size) {
  Sha256 h;
  uint64_t total = 0;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return base::ErrnoError("read(hash)", errno);
    }
    if (n == 0) {
      break;
    }
    h.Update(absl::string_view(buf, static_cast<size_t>(n)));
    total += static_cast<uint64_t>(n);
  }
  if (size != nullptr) {
    *size = total;
  }
  return h.Finish();
}

bool IsSha256Hex(absl::string_view s) {
  if (s.size() != 64) {
    return false;
  }
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

}  // namespace abox::workspace
