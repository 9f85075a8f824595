// libFuzzer target: the identity request `abox-guest identity` reads on stdin. The parser must
// never crash or throw, and whatever it accepts must hold what the effects rely on (a 64-byte
// seed, a non-negative clock, a hostname and ids of the allowed characters and lengths).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "src/guest/identity_tool.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

// Only digits, lower-case letters and the characters of `extra`.
bool AllOf(const std::string& s, const std::string& extra) {
  for (char c : s) {
    bool ok =
        absl::ascii_isdigit(c) || absl::ascii_islower(c) || extra.find(c) != std::string::npos;
    if (!ok) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<abox::guest::IdentityRequest> r = abox::guest::ParseIdentityRequest(text);
  if (!r.ok()) {
    return 0;
  }
  Check(size <= abox::guest::kMaxIdentityRequestBytes);
  Check(r->seed.size() == abox::guest::kIdentitySeedBytes);
  Check(r->unix_time_ns >= 0);
  Check(!r->hostname.empty() && r->hostname.size() <= 63 && AllOf(r->hostname, "-"));
  Check(r->hostname.front() != '-' && r->hostname.back() != '-');
  Check(r->machine_id.size() == 32 && AllOf(r->machine_id, ""));
  Check(r->machine_id.find_first_not_of("0123456789abcdef") == std::string::npos);
  Check(!r->sandbox_id.empty() && r->sandbox_id.size() <= 64 && AllOf(r->sandbox_id, "_.-"));
  return 0;
}
