// The way to a ready sandbox's workspace tools (`abox-guest ws ...` over its agent), capped per
// sandbox and daemon-wide so that guests that stall their tools never take every worker: stop,
// rm and exec of every sandbox always find one.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/daemon/lifecycle/sandbox_context.h"
#include "src/workspace/guest_tools.h"

namespace abox::daemon {

// Thread-safe.
class GuestToolsGate final {
 public:
  explicit GuestToolsGate(SandboxContext& ctx) : ctx_(&ctx) {}

  using ToolsFn = std::function<absl::Status(const store::SandboxRecord&, workspace::GuestTools&)>;
  // Runs `fn` with the ready sandbox's tools. The sandbox is not torn down while `fn` runs: a
  // stop first fails the agent connection, which makes `fn`'s guest calls fail, then waits
  // for `fn` to return. 429 past the daemon-wide cap, 409 past the sandbox's.
  [[nodiscard]] absl::Status WithGuestTools(absl::string_view ref, const ToolsFn& fn);

  // Runs `fn` with the tools of `sandbox` (booting: the create's first sync; no caps).
  [[nodiscard]] absl::Status WithToolsOf(
      const std::string& id, runtime::Sandbox& sandbox,
      const std::function<absl::Status(workspace::GuestTools&)>& fn);

 private:
  SandboxContext* ctx_;
  std::atomic<int> in_flight_{0};  // WithGuestTools calls in flight, all sandboxes
};

}  // namespace abox::daemon
