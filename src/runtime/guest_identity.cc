#include "src/runtime/guest_identity.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/base/status_macros.h"
#include "src/net/host_name.h"

namespace abox::runtime {
namespace {

constexpr size_t kMaxSandboxId = 64;
constexpr size_t kHostnameIdChars = 12;
constexpr size_t kMachineIdBytes = 16;

bool IsSandboxIdChar(char c) {
  return absl::ascii_islower(static_cast<unsigned char>(c)) ||
         absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

absl::Status FillRandom(std::string& out, size_t n) {
  out.assign(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::getrandom(out.data() + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) {
        continue;
      }
      return base::ErrnoError("getrandom");
    }
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

// "abox-" + the first kHostnameIdChars characters of the id that a hostname may hold.
std::string HostnameFor(const std::string& sandbox_id) {
  std::string part;
  for (char c : sandbox_id) {
    char l = absl::ascii_tolower(static_cast<unsigned char>(c));
    if (part.size() < kHostnameIdChars &&
        (absl::ascii_islower(static_cast<unsigned char>(l)) ||
         absl::ascii_isdigit(static_cast<unsigned char>(l)) || l == '-')) {
      part.push_back(l);
    }
  }
  while (!part.empty() && part.back() == '-') {
    part.pop_back();  // a hostname does not end with '-'
  }
  return part.empty() ? "abox" : absl::StrCat("abox-", part);
}

// What the guest said, for an error message: trimmed, at most kMaxIdentityOutput bytes,
// printable ASCII only.
std::string Shown(absl::string_view text) {
  return net::QuoteForLog(absl::StripAsciiWhitespace(text), kMaxIdentityOutput);
}

}  // namespace

absl::StatusOr<GuestIdentity> NewGuestIdentity(const std::string& sandbox_id) {
  if (sandbox_id.empty() || sandbox_id.size() > kMaxSandboxId ||
      !std::all_of(sandbox_id.begin(), sandbox_id.end(), IsSandboxIdChar)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sandbox id '", net::QuoteForLog(sandbox_id),
                     "' cannot name a guest: it must be 1-64 of [a-z0-9_.-]"));
  }
  GuestIdentity identity;
  identity.sandbox_id = sandbox_id;
  identity.hostname = HostnameFor(sandbox_id);
  ABOX_RETURN_IF_ERROR(FillRandom(identity.seed, kIdentitySeedBytes));
  std::string machine;
  ABOX_RETURN_IF_ERROR(FillRandom(machine, kMachineIdBytes));
  identity.machine_id = absl::BytesToHexString(machine);
  identity.now = absl::Now();
  return identity;
}

std::string EncodeIdentityRequest(const GuestIdentity& identity) {
  // Every field but the seed is plain ASCII from a fixed set (NewGuestIdentity), so no escaping
  // is needed; the guest validates them all again.
  return absl::StrCat(R"({"seed":")", absl::Base64Escape(identity.seed), R"(","unix_time_ns":)",
                      absl::ToUnixNanos(identity.now), R"(,"hostname":")", identity.hostname,
                      R"(","machine_id":")", identity.machine_id, R"(","sandbox_id":")",
                      identity.sandbox_id, R"("})");
}

absl::Status ApplyGuestIdentity(AgentClient& agent, const GuestIdentity& identity,
                                const std::string& tool_path, absl::Duration timeout) {
  const std::string what = absl::StrCat("setting the identity of sandbox ", identity.sandbox_id);
  proto::ExecRequest request;
  request.argv = {tool_path, "identity"};
  request.user = "root";
  request.cwd = "/";
  request.stdin_open = true;
  // The guest kills the tool at the timeout; the host holds it to that too (timeout_grace).
  request.timeout_ms =
      static_cast<uint64_t>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  absl::StatusOr<std::unique_ptr<Exec>> exec = agent.StartExec(request);
  if (!exec.ok()) {
    return base::Annotate(exec.status(), what);
  }
  GuestIdentity fresh = identity;
  fresh.now = absl::Now();
  absl::Status sent = (*exec)->WriteStdin(EncodeIdentityRequest(fresh));
  (*exec)->CloseStdin();
  std::string output;  // stdout and stderr, as they came, bounded
  while (std::optional<Exec::Chunk> chunk = (*exec)->ReadOutput()) {
    if (output.size() < kMaxIdentityOutput) {
      output.append(chunk->data.substr(0, kMaxIdentityOutput - output.size()));
    }
  }
  absl::StatusOr<proto::ExitInfo> exit = (*exec)->Wait();
  if (!exit.ok()) {
    return base::Annotate(exit.status(), what);
  }
  if (exit->timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        what, ": `abox-guest identity` did not finish within ", absl::FormatDuration(timeout),
        exit->error.empty() ? "" : " (", Shown(exit->error), exit->error.empty() ? "" : ")",
        "; the sandbox must not run commands with the template's identity: stop it"));
  }
  if (!exit->error.empty()) {
    return absl::InternalError(
        absl::StrCat(what, ": `abox-guest identity` could not start: ", Shown(exit->error),
                     " (rebuild the image: abox image build --force)"));
  }
  if (exit->ShellCode() != 0) {
    std::string said = Shown(output);
    return absl::InternalError(absl::StrCat(what, ": `abox-guest identity` failed (exit ",
                                            exit->ShellCode(), ")", said.empty() ? "" : ": ",
                                            said));
  }
  if (!sent.ok()) {
    // It exited 0 without reading its request: not a tool that applied it.
    return base::Annotate(sent, absl::StrCat(what, ": sending the request"));
  }
  return absl::OkStatus();
}

}  // namespace abox::runtime
