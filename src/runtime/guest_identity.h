// Each guest's own identity. A VM restored from a memory snapshot (a template) starts with the
// template's kernel RNG state, wall clock, hostname and machine-id; before any user command
// runs, the host gives it fresh ones by running `abox-guest identity` (src/guest/identity_tool.h)
// as root over the agent channel.
//
// Trust: the guest's answer is untrusted. Only its exit status counts; what it printed is kept
// to kMaxIdentityOutput bytes and shown in errors as printable ASCII only.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/runtime/agent_client.h"
#include "src/runtime/agent_guest_tools.h"

namespace abox::runtime {

inline constexpr size_t kIdentitySeedBytes = 64;
// What is kept of the identity tool's output (it prints one short line).
inline constexpr size_t kMaxIdentityOutput = 4 << 10;

struct GuestIdentity {
  std::string sandbox_id;  // 1-64 of [a-z0-9_.-]
  std::string hostname;    // "abox-" + up to 12 characters of the sandbox id
  std::string machine_id;  // 32 lowercase hex digits
  std::string seed;        // kIdentitySeedBytes raw random bytes for the guest's kernel RNG
  absl::Time now;          // the guest's new wall clock
};

// A fresh identity for `sandbox_id`: the seed and machine id from getrandom(2), the hostname
// "abox-" + the first 12 characters of the id (lowercased, characters a hostname may not hold
// dropped), now = absl::Now(). kInvalidArgument when the id is not 1-64 of [a-z0-9_.-]
// (the guest would refuse it).
[[nodiscard]] absl::StatusOr<GuestIdentity> NewGuestIdentity(const std::string& sandbox_id);

// The JSON request `abox-guest identity` reads on stdin.
std::string EncodeIdentityRequest(const GuestIdentity& identity);

// Runs `<tool_path> identity` as root in the guest through `agent`, with the request for
// `identity` on its stdin (its `now` refreshed right before sending, so the clock the guest sets
// is as fresh as it can be). OK only when the tool exits 0 within `timeout`; a guest that does
// not end it in time is killed there, and one that does not even report that fails `agent` (see
// AgentClient::Options::timeout_grace). `tool_path`: tests with a fake VMM, whose "guest" is
// this host, pass a fake tool (the real one would set the host's clock).
[[nodiscard]] absl::Status ApplyGuestIdentity(AgentClient& agent, const GuestIdentity& identity,
                                              const std::string& tool_path = kGuestAgentPath,
                                              absl::Duration timeout = absl::Seconds(10));

}  // namespace abox::runtime
