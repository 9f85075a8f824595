// Commands in sandboxes: starting them (API execs and a create's setup commands go the same
// way, so both are in the exec history), finding them, their kept output and history.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/api/exec.h"
#include "src/daemon/lifecycle/sandbox_context.h"
#include "src/daemon/services/guest_tools_gate.h"
#include "src/daemon/services/live_exec.h"
#include "src/proto/messages.h"

namespace abox::daemon {

// An exec as found by id: its stored record and, while it runs, the live object.
struct ExecHandle {
  store::ExecRecord record;
  std::shared_ptr<LiveExec> live;  // null once it ended (or after a restart)
};

// Thread-safe.
class ExecService final {
 public:
  ExecService(SandboxContext& ctx, GuestToolsGate& gate) : ctx_(&ctx), gate_(&gate) {}

  // Syncs the bound workspace in first (request.sync), then starts the command in the ready
  // sandbox `ref` (id, name or unique id prefix).
  [[nodiscard]] absl::StatusOr<std::shared_ptr<LiveExec>> Start(absl::string_view ref,
                                                                const api::ExecCreate& request);
  [[nodiscard]] absl::StatusOr<ExecHandle> Find(absl::string_view ref, absl::string_view exec_id);
  // An exec's record with its kept output (by exact exec id).
  [[nodiscard]] absl::StatusOr<store::ExecWithOutput> Output(absl::string_view exec_id);
  [[nodiscard]] absl::StatusOr<std::vector<store::ExecRecord>> List(absl::string_view ref,
                                                                    int limit);

  // Records `request` as an exec of the sandbox and starts it through `agent`: the one exec
  // path (Start and the setup runner).
  [[nodiscard]] absl::StatusOr<std::shared_ptr<LiveExec>> Launch(const std::string& sandbox_id,
                                                                 runtime::AgentClient& agent,
                                                                 const api::ExecCreate& request,
                                                                 LiveExec::DoneFn on_done);

  // Callbacks posted to the timer thread check this: false once the daemon shuts down.
  void set_alive(std::weak_ptr<bool> alive) { alive_ = std::move(alive); }
  // Brings a paused sandbox back before a command starts in it (SandboxService::Resume); unset:
  // a paused sandbox refuses commands.
  void set_resumer(std::function<absl::Status(const std::string& id)> resume) {
    resume_ = std::move(resume);
  }

 private:
  // Refuses a command carrying a stored secret's real value, adds the sandbox's placeholders
  // and CA variables to its environment, and watches its stdin for values.
  absl::Status GiveSecrets(const std::string& sandbox_id, const api::ExecCreate& request,
                           proto::ExecRequest& wire, LiveExec::Options& options);

  SandboxContext* ctx_;
  GuestToolsGate* gate_;
  std::weak_ptr<bool> alive_;
  std::function<absl::Status(const std::string& id)> resume_;
};

}  // namespace abox::daemon
