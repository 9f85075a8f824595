#include "src/daemon/services/guest_tools_gate.h"

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/daemon/lifecycle/transitions.h"

namespace abox::daemon {

absl::Status GuestToolsGate::WithToolsOf(
    const std::string& id, runtime::Sandbox& sandbox,
    const std::function<absl::Status(workspace::GuestTools&)>& fn) {
  runtime::AgentGuestTools tools(sandbox.agent(), ctx_->options.guest_tool_path,
                                 ctx_->options.guest_tool_deadline, id);
  std::unique_ptr<workspace::GuestTools> wrapped =
      ctx_->options.wrap_guest_tools ? ctx_->options.wrap_guest_tools(tools) : nullptr;
  return fn(wrapped ? *wrapped : tools);
}

absl::Status GuestToolsGate::WithGuestTools(absl::string_view ref, const ToolsFn& fn) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  const int max_all = ctx_->options.max_guest_operations;
  const int max_one = ctx_->options.max_guest_operations_per_sandbox;
  if (in_flight_.fetch_add(1) >= max_all) {
    in_flight_.fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "aboxd already runs ", max_all,
        " workspace operations, the most it runs at once (so that stop, rm and exec always find "
        "a worker): retry in a moment (each guest tool ends within its deadline)"));
  }
  absl::Cleanup counted = [&] { in_flight_.fetch_sub(1); };
  // Not serving: the lifecycle table says why (a ready record whose VM is going is told so too).
  auto not_serving = [&] {
    Decision d = Decide(Operation::kWorkspace, record);
    return d.verdict == Verdict::kRefuse
               ? d.refusal
               : absl::FailedPreconditionError(
                     absl::StrCat(StateText(record),
                                  " and stopping: the workspace is read through a running "
                                  "sandbox"));
  };
  std::shared_ptr<LiveSandbox> live = ctx_->registry->Find(record.id);
  if (live == nullptr) {
    return not_serving();
  }
  std::variant<LiveSandbox::ToolLease, LiveSandbox::LeaseRefusal> lease = live->LeaseTools(max_one);
  if (auto* refused = std::get_if<LiveSandbox::LeaseRefusal>(&lease)) {
    if (*refused == LiveSandbox::LeaseRefusal::kBusy) {
      return absl::AbortedError(absl::StrCat(
          "sandbox ", record.id, " already has ", max_one,
          " workspace operations in flight (sync, diff, apply, pull or an exec's sync): retry "
          "when they finish (each guest tool ends within its deadline), or stop the sandbox"));
    }
    return not_serving();
  }
  LiveSandbox::ToolLease& held = std::get<LiveSandbox::ToolLease>(lease);
  return WithToolsOf(record.id, held.sandbox(),
                     [&](workspace::GuestTools& tools) { return fn(record, tools); });
}

}  // namespace abox::daemon
