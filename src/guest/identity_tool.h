// `abox-guest identity`: gives a guest its own identity before any user command runs. A VM
// restored from a memory snapshot starts with the template's kernel RNG state, wall clock,
// hostname and machine-id; the host runs this tool as root through the exec channel (argv
// /run/abox/abox-guest identity) with one JSON object on stdin:
//
//   {"seed": "<base64 of 64 random bytes>", "unix_time_ns": <int64>,
//    "hostname": "<1-63 of [a-z0-9-]>", "machine_id": "<32 lowercase hex>",
//    "sandbox_id": "<1-64 of [a-z0-9_.-]>"}
//
// and it applies, in order: the seed to the kernel RNG (credited, then an immediate CRNG
// reseed), the wall clock, the hostname, /etc/machine-id and /run/abox/sandbox-id (each file
// the id and a newline).
//
// Trust: the request comes from the host, but it is parsed as untrusted input all the same
// (bounded, every field type-checked, unknown or repeated fields refused): a malformed request
// applies nothing. A step that fails stops the run and is named on stderr (exit 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::guest {

inline constexpr size_t kMaxIdentityRequestBytes = 4096;
inline constexpr size_t kIdentitySeedBytes = 64;
inline constexpr char kMachineIdPath[] = "/etc/machine-id";
inline constexpr char kSandboxIdPath[] = "/run/abox/sandbox-id";

// A validated request (see the file comment for the wire form).
struct IdentityRequest {
  std::string seed;  // kIdentitySeedBytes raw bytes
  int64_t unix_time_ns = 0;
  std::string hostname;
  std::string machine_id;
  std::string sandbox_id;
};

// Parses and validates one request; kInvalidArgument (or kResourceExhausted when oversized)
// naming the first problem.
[[nodiscard]] absl::StatusOr<IdentityRequest> ParseIdentityRequest(absl::string_view text);

// The system calls the tool makes, behind an interface so that tests check them with a fake
// (the real ones would change the test host's clock and hostname).
class IdentityEffects {
 public:
  virtual ~IdentityEffects() = default;
  // Mixes `seed` into the kernel RNG, credited in full, and reseeds the CRNG from it at once.
  [[nodiscard]] virtual absl::Status AddEntropy(absl::string_view seed) = 0;
  // Sets CLOCK_REALTIME.
  [[nodiscard]] virtual absl::Status SetClock(int64_t unix_time_ns) = 0;
  [[nodiscard]] virtual absl::Status SetHostname(absl::string_view hostname) = 0;
  // Replaces `path` atomically (temp file + rename) with `data`, mode 0444.
  [[nodiscard]] virtual absl::Status WriteFile(const std::string& path, absl::string_view data) = 0;
};

// The real system calls (root only; effective in the VM).
class SystemIdentityEffects final : public IdentityEffects {
 public:
  absl::Status AddEntropy(absl::string_view seed) override;
  absl::Status SetClock(int64_t unix_time_ns) override;
  absl::Status SetHostname(absl::string_view hostname) override;
  absl::Status WriteFile(const std::string& path, absl::string_view data) override;
};

// Applies `request` in the order of the file comment; stops at the first failing step, whose
// error names it.
[[nodiscard]] absl::Status ApplyIdentity(const IdentityRequest& request, IdentityEffects& effects);

// Runs `identity` (argv[0] is "identity"): reads the request from in_fd, applies it through
// `effects`, prints {"ok":true} on out_fd. Returns 0 on success, 1 on failure (one line on
// err_fd), 2 on a usage error.
int RunIdentityTool(int argc, char** argv, int in_fd, int out_fd, int err_fd,
                    IdentityEffects& effects);

}  // namespace abox::guest
