// JSON control messages carried in kHello, kOpen, kSignal, kResize, kExit, kReset, kGoodbye and
// kTunnelOpen frames. Decoders validate every field (types, ranges, sizes) because the host decodes
// what a hostile guest sends and the guest decodes what the host sends.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::proto {

struct Hello {
  uint32_t version = 0;                   // highest version the sender speaks
  uint32_t min_version = 0;               // lowest version the sender speaks
  std::string agent_version;              // free text, e.g. "0.1.0"
  std::vector<std::string> capabilities;  // e.g. "exec", "pty", "signal"
  uint32_t max_payload = 0;
  uint32_t window = 0;
};
std::string EncodeHello(const Hello& h);
[[nodiscard]] absl::StatusOr<Hello> DecodeHello(absl::string_view payload);
// The version both sides speak (the highest common), or an error naming both ranges.
[[nodiscard]] absl::StatusOr<uint32_t> NegotiateVersion(const Hello& ours, const Hello& theirs);

struct PtySize {
  uint16_t rows = 24;
  uint16_t cols = 80;
};

struct ExecRequest {
  std::vector<std::string> argv;           // exactly one of argv / shell
  std::optional<std::string> shell;        // run through /bin/sh -c
  std::map<std::string, std::string> env;  // added to the guest's base environment
  std::string cwd;                         // empty: the user's home
  std::string user;                        // "" or "agent": unprivileged; "root": root
  uint64_t timeout_ms = 0;                 // 0: none; on expiry the whole process group is killed
  bool stdin_open = false;                 // host will stream stdin; otherwise stdin is /dev/null
  std::optional<PtySize> pty;              // allocate a PTY (stdout carries the merged output)
  // When the command's main process ends, every process it left (background jobs, daemons that
  // called setsid) is killed: the agent runs it in a cgroup of its own when it can.
  bool kill_leftovers = false;
};
std::string EncodeExecRequest(const ExecRequest& r);
[[nodiscard]] absl::StatusOr<ExecRequest> DecodeExecRequest(absl::string_view payload);

struct ExitInfo {
  std::optional<int> exit_code;  // exactly one of exit_code / signal
  std::optional<int> signal;
  bool timed_out = false;
  std::string error;  // why the command could not start (e.g. "ls: command not found")
  uint64_t duration_us = 0;
  // Processes the guest kernel's OOM killer killed while the command ran (whether the command's
  // or not: the guest counts them VM-wide, see docs/protocol.md). On the wire "oom_kills", sent
  // only when not 0; absent (an older agent) is 0; at most kMaxOomKills.
  uint32_t oom_kills = 0;
  // Shell convention: exit code, or 128 + signal.
  [[nodiscard]] int ShellCode() const { return exit_code ? *exit_code : 128 + signal.value_or(0); }
};
std::string EncodeExitInfo(const ExitInfo& e);
[[nodiscard]] absl::StatusOr<ExitInfo> DecodeExitInfo(absl::string_view payload);

std::string EncodeSignal(int signal);
[[nodiscard]] absl::StatusOr<int> DecodeSignal(absl::string_view payload);

std::string EncodeResize(const PtySize& s);
[[nodiscard]] absl::StatusOr<PtySize> DecodeResize(absl::string_view payload);

// kReset / kGoodbye: {"error": "..."} (the text is bounded and sanitized on decode).
std::string EncodeError(absl::string_view error);
[[nodiscard]] absl::StatusOr<std::string> DecodeError(absl::string_view payload);

// kTunnelOpen: what the guest's local end caught. Everything in it is the guest's claim; the
// host decides on its own what it allows.
enum class TunnelKind : uint8_t {
  kTcp,    // a TCP connection caught by the transparent redirect, to `dst`:`port`
  kProxy,  // a connection to the guest's HTTP proxy port (the host parses CONNECT / absolute-form)
  kDns,    // DNS messages, each with a 2-byte big-endian length prefix (RFC 1035 TCP framing)
  kModel,  // a connection to the guest's model broker port (plain HTTP to aboxd's model broker)
};
// Where agents inside the VM reach the model broker: connections to 127.0.0.1 on this port
// become kModel tunnels (http://127.0.0.1:15080/anthropic, http://127.0.0.1:15080/openai/v1).
inline constexpr uint16_t kModelBrokerPort = 15080;

struct TunnelRequest {
  TunnelKind kind = TunnelKind::kTcp;
  std::string dst;    // kTcp only: an IPv4 or IPv6 literal (inet_pton form)
  uint16_t port = 0;  // kTcp only: 1..65535
};
// "tcp", "proxy", "dns", "model".
const char* TunnelKindName(TunnelKind kind);
std::string EncodeTunnelRequest(const TunnelRequest& r);
// Rejects unknown fields and kinds, dst/port on kinds other than kTcp, a kTcp without both, a dst
// that is not an address literal and port 0.
[[nodiscard]] absl::StatusOr<TunnelRequest> DecodeTunnelRequest(absl::string_view payload);

// Limits enforced by the decoders.
inline constexpr size_t kMaxArgs = 4096;
inline constexpr size_t kMaxEnv = 4096;
inline constexpr size_t kMaxErrorText = 4096;
inline constexpr size_t kMaxCapabilities = 64;
// An exit's oom_kills above this is a violation (the agent clamps its count to it).
inline constexpr uint32_t kMaxOomKills = 1000000;

}  // namespace abox::proto
