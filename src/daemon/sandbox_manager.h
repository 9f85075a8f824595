// aboxd's sandboxes: creates and boots them, runs their commands, stops and removes them, keeps
// the SQLite state true, re-attaches after a restart, and stops the ones whose TTL or idle
// timeout passed. Request handlers are thin layers over this class.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/api/resource_json.h"
#include "src/daemon/egress_service.h"
#include "src/daemon/event_bus.h"
#include "src/daemon/ledger.h"
#include "src/daemon/live_exec.h"
#include "src/daemon/timer_queue.h"
#include "src/daemon/workspace_service.h"
#include "src/image/image_store.h"
#include "src/runtime/agent_guest_tools.h"
#include "src/runtime/sandbox.h"
#include "src/store/exec_repo.h"
#include "src/store/sandbox_repo.h"
#include "src/vmm/vmm.h"

namespace abox::daemon {

struct ManagerOptions {
  absl::Duration boot_timeout = absl::Seconds(90);
  // How long a re-attached guest agent may take to answer again.
  absl::Duration attach_timeout = absl::Seconds(15);
  // An exec started with kill_on_disconnect that no client attached to within this long is
  // killed (its client died between the create and the attach).
  absl::Duration exec_attach_deadline = absl::Seconds(10);
  // How long a create's setup commands may take together, unless setup.timeout_seconds says.
  absl::Duration setup_timeout = absl::Minutes(10);
  // How often TTL and idle timeouts are checked.
  absl::Duration reap_interval = absl::Seconds(1);
  // Tests with a fake VMM: boot these files for every image instead of $ABOX_HOME/images.
  std::optional<image::ImageFiles> image_files;
  // The agent binary in the guest that runs the workspace tools (tests with a fake VMM, whose
  // guest is this host, pass the built abox-guest).
  std::string guest_tool_path = runtime::kGuestAgentPath;
  // How long each guest workspace tool (ws manifest / unpack / pack) may run before it is
  // killed and its operation fails (see runtime::GuestToolDeadline).
  runtime::GuestToolDeadline guest_tool_deadline;
  // Workspace operations (sync, diff, apply, pull, an exec's sync) one sandbox may have in
  // flight; more are refused at once, so a guest that stalls them holds at most this many of
  // the daemon's blocking workers and other sandboxes' stop, rm and exec still get one.
  int max_guest_operations_per_sandbox = 2;
  // Workspace operations of all sandboxes together; aboxd has 8 blocking workers, and this
  // keeps 2 of them for stop, rm and exec even when several guests stall theirs.
  int max_guest_operations = 6;
  // Tests: stands in for the workspace tools of every workspace operation (a hostile guest's
  // crafted manifests and packs), given the real ones; null, or a null result: the real ones.
  std::function<std::unique_ptr<workspace::GuestTools>(workspace::GuestTools& real)>
      wrap_guest_tools;
};

// The pieces the manager works with; all must outlive it.
struct ManagerDeps {
  vmm::Vmm* vmm;
  store::SandboxRepo* sandboxes;
  store::ExecRepo* execs;
  EventBus* events;
  Ledger* ledger;
  TimerQueue* timers;
  WorkspaceService* workspaces;
  // Null: sandboxes get no egress (every tunnel is reset) and egress requests are refused.
  EgressService* egress = nullptr;
};

// A sandbox as the API shows it: the stored record plus live facts.
struct SandboxView {
  store::SandboxRecord record;
  api::SandboxLive live;
};

// An exec as found by id: its stored record and, while it runs, the live object.
struct ExecHandle {
  store::ExecRecord record;
  std::shared_ptr<LiveExec> live;  // null once it ended (or after a restart)
};

// Thread-safe. Blocking methods (Create, Stop, Remove, Recover) must not run on an I/O thread.
class SandboxManager final {
 public:
  SandboxManager(ManagerDeps deps, ManagerOptions options);
  SandboxManager(const SandboxManager&) = delete;
  SandboxManager& operator=(const SandboxManager&) = delete;
  // Detaches from every running sandbox (see DetachAll).
  ~SandboxManager();

  // After a daemon start, before serving: execs left running become interrupted, running
  // sandboxes are re-attached (or marked failed with the reason when their VM died), booting
  // and stopping ones are finished off. Then starts the TTL / idle reaper.
  [[nodiscard]] absl::Status Recover();

  // Reserves capacity, records the sandbox as creating, calls `accepted` with that record, then
  // boots it and returns it ready. A boot failure leaves it listed as failed and is returned.
  [[nodiscard]] absl::StatusOr<SandboxView> Create(
      const api::SandboxCreate& request,
      const std::function<void(const SandboxView&)>& accepted = nullptr);

  // `ref`: id, name or unique id prefix.
  [[nodiscard]] absl::StatusOr<SandboxView> Get(absl::string_view ref);
  [[nodiscard]] absl::StatusOr<std::vector<SandboxView>> List(const store::SandboxFilter& filter);

  // Stops the VM (running execs end as interrupted), releases its capacity; the record, exec
  // history and console log stay until Remove. A stopped or failed sandbox is returned as is.
  [[nodiscard]] absl::StatusOr<SandboxView> Stop(absl::string_view ref);
  // Removes the sandbox, its files and its history. A running one needs `force`.
  [[nodiscard]] absl::Status Remove(absl::string_view ref, bool force);

  // The newest `max_bytes` of the console log (running sandboxes: the live log; others: the
  // copy kept when they failed, if any).
  [[nodiscard]] absl::StatusOr<std::string> ConsoleLog(absl::string_view ref, size_t max_bytes);

  [[nodiscard]] absl::StatusOr<std::shared_ptr<LiveExec>> StartExec(absl::string_view ref,
                                                                    const api::ExecCreate& request);
  [[nodiscard]] absl::StatusOr<ExecHandle> FindExec(absl::string_view ref,
                                                    absl::string_view exec_id);
  // An exec's record with its kept output (by exact exec id).
  [[nodiscard]] absl::StatusOr<store::ExecWithOutput> ExecOutput(absl::string_view exec_id);
  [[nodiscard]] absl::StatusOr<std::vector<store::ExecRecord>> ListExecs(absl::string_view ref,
                                                                         int limit);

  // Runs `fn` with the ready sandbox's workspace tools (`abox-guest ws ...` over its agent).
  // The sandbox is not torn down while `fn` runs: a stop first fails the agent connection,
  // which makes `fn`'s guest calls fail, then waits for `fn` to return.
  [[nodiscard]] absl::Status WithGuestTools(
      absl::string_view ref,
      const std::function<absl::Status(const store::SandboxRecord&, workspace::GuestTools&)>& fn);

  // Sandboxes running now, and the accelerator the last boot got ("" before any).
  [[nodiscard]] int RunningCount();
  [[nodiscard]] std::string LastAccel();

  // Daemon shutdown: running execs end as interrupted, every VM is left running (detached) for
  // the next aboxd to re-attach. Stops the reaper. Idempotent.
  void DetachAll();

  // Runs one TTL / idle check now (tests; the reaper calls it every reap_interval).
  void ReapExpired();

 private:
  struct Entry {
    std::string id;
    std::mutex mu;                              // guards the fields below
    std::unique_ptr<runtime::Sandbox> sandbox;  // null while booting
    std::map<std::string, std::shared_ptr<LiveExec>> execs;
    bool stopping = false;
    int guest_tool_users = 0;  // WithGuestTools calls in flight; TearDown waits for 0
    std::condition_variable tools_idle;
  };
  // Syncs the bound workspace (if any) through `sandbox`'s agent.
  absl::Status SyncWorkspace(const std::string& id, runtime::Sandbox& sandbox);
  // Records `request` as an exec of the sandbox and starts it through `agent` (the one exec
  // path: API execs and setup commands alike, so both are in the exec history).
  absl::StatusOr<std::shared_ptr<LiveExec>> LaunchExec(const std::string& sandbox_id,
                                                       runtime::AgentClient& agent,
                                                       const api::ExecCreate& request,
                                                       LiveExec::DoneFn on_done);
  // The setup phase of a create: `rules` widen the egress policy while each command runs (as
  // agent, in the workspace); the first that fails ends it with an error naming it, its exit
  // and the tail of its output. The policy is narrowed again either way, and then every tunnel
  // still open (opened under the wider policy) is reset. What a command leaves running in its
  // process group is killed as the command ends (SetupShell).
  absl::Status RunSetup(const std::string& id, runtime::Sandbox& sandbox,
                        const api::SetupSpec& setup, std::vector<net::Rule> rules);
  // RunSetup's commands, in order, within the setup's timeout (setup.timeout_seconds, else
  // ManagerOptions::setup_timeout): kDeadlineExceeded when it runs out.
  absl::Status RunSetupCommands(const std::string& id, runtime::Sandbox& sandbox,
                                const api::SetupSpec& setup);

  std::shared_ptr<Entry> FindEntry(const std::string& id);
  api::SandboxLive LiveOf(const std::string& id);
  // Ends every exec with `reason`, tears the VM down, releases capacity and forgets the entry.
  // `detach` leaves the VM running instead.
  absl::Status TearDown(const std::shared_ptr<Entry>& entry, const std::string& reason,
                        bool detach);
  void OnAgentFailure(const std::string& id, const absl::Status& status);
  void ScheduleReaper();
  std::function<void(const absl::Status&)> FailureCallback(const std::string& id);

  ManagerDeps deps_;
  ManagerOptions options_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> live_;
  std::atomic<int> guest_operations_{0};  // WithGuestTools calls in flight, all sandboxes
  std::string last_accel_;
  bool detached_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace abox::daemon
