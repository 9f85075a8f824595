// Sandboxes as the API sees them: create (a pipeline of steps with undo, whose boot, sync and
// setup run on a thread of their own), get, list, stop, remove, console log; and what keeps
// them true across failures and restarts (agent failures, recovery at start, the detach at
// shutdown). Handlers call this; the lifecycle table decides what each state allows.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/api/sandbox.h"
#include "src/daemon/lifecycle/background_tasks.h"
#include "src/daemon/lifecycle/pipeline.h"
#include "src/daemon/lifecycle/sandbox_context.h"
#include "src/daemon/lifecycle/vm_booter.h"
#include "src/daemon/services/create_spec.h"
#include "src/daemon/services/guest_tools_gate.h"
#include "src/daemon/services/setup_runner.h"

namespace abox::daemon {

// A sandbox as the API shows it: the stored record plus live facts.
struct SandboxView {
  store::SandboxRecord record;
  api::SandboxLive live;
};

struct CreateJob;

// Thread-safe. Blocking methods (Create's admission, Stop, Remove, Recover) must not run on an
// I/O thread.
class SandboxService final {
 public:
  SandboxService(SandboxContext& ctx, GuestToolsGate& gate, SetupRunner& setup);
  SandboxService(const SandboxService&) = delete;
  SandboxService& operator=(const SandboxService&) = delete;
  // Shuts down (see Shutdown).
  ~SandboxService();

  // After a daemon start, before serving: execs left running become interrupted, running
  // sandboxes are re-attached (or marked failed with the reason when their VM died), booting
  // and stopping ones are finished off, and VMs of known sandboxes that no record names (a
  // restore or resume cut short) are killed.
  [[nodiscard]] absl::Status Recover();

  using AcceptedFn = std::function<void(const SandboxView&)>;
  using DoneFn = std::function<void(absl::StatusOr<SandboxView>)>;
  // Admits the request on the calling thread (checks it, reserves capacity, records the
  // sandbox as creating, binds its workspace and policy) and calls `accepted`; then boots,
  // syncs and sets it up on a thread of its own and calls `done` there with the ready sandbox
  // or the failure (the sandbox then is listed as failed). A request refused at admission
  // calls only `done`, on the calling thread, and leaves nothing behind.
  void Create(const api::SandboxCreate& request, AcceptedFn accepted, DoneFn done);
  // Create, waiting for the outcome.
  [[nodiscard]] absl::StatusOr<SandboxView> CreateAndWait(const api::SandboxCreate& request);

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

  // --- Checkpoints (sandbox_checkpoints.cc). kUnimplemented when the VMM cannot save state.
  // Saves a running sandbox (memory, processes, disk, workspace state) while it keeps running.
  [[nodiscard]] absl::StatusOr<CheckpointInfo> Checkpoint(absl::string_view ref,
                                                          const std::string& name);
  [[nodiscard]] absl::StatusOr<std::vector<CheckpointInfo>> Checkpoints(absl::string_view ref);
  [[nodiscard]] absl::Status RemoveCheckpoint(absl::string_view ref, const std::string& checkpoint);
  // Puts a sandbox back as it was at the checkpoint: a running one's VM is replaced (running
  // commands end as interrupted); a stopped or failed one (its VM gone) runs again, in a new VM
  // (nothing is lost when QEMU dies: its checkpoints bring it back). Its workspace base is the
  // checkpoint's.
  [[nodiscard]] absl::StatusOr<SandboxView> Restore(absl::string_view ref,
                                                    const std::string& checkpoint);
  // `count` new sandboxes from a checkpoint of a running one, each with its own disk,
  // identity, egress policy copy and workspace state; named PREFIX-1.. when a prefix is given.
  // All or nothing: when one does not come up, those that did are removed and the first
  // failure is returned.
  [[nodiscard]] absl::StatusOr<std::vector<SandboxView>> Fork(absl::string_view ref, int count,
                                                              const std::string& name_prefix);

  // --- Pause to disk (sandbox_pause.cc). kUnimplemented when the VMM cannot save state.
  // Saves a ready sandbox's whole state to disk and ends its VM (its capacity is released; a
  // command that was running ends as interrupted). `why` goes in the `paused` event. A paused
  // sandbox is returned as it is.
  [[nodiscard]] absl::StatusOr<SandboxView> Pause(absl::string_view ref, const std::string& why);
  // Brings a paused sandbox back from its saved state (processes and files as they were, the
  // clock now). A ready one is returned as it is. On failure it stays paused, with the reason.
  [[nodiscard]] absl::StatusOr<SandboxView> Resume(absl::string_view ref);

  // The reaper's stop: `reason` says which timeout passed; `expiry` is "ttl" or "idle".
  void StopExpired(const std::string& id, const std::string& reason, const std::string& expiry);

  // Sandboxes live now (booting included), and the accelerator the last boot got ("" before
  // any).
  [[nodiscard]] int RunningCount();
  [[nodiscard]] std::string LastAccel();

  // Daemon shutdown, first part (while the server still answers): new creates are refused,
  // creates in flight are ended (their undo runs: they are left failed, and a waiting client
  // is told so), and their threads are waited for. Idempotent.
  void EndCreates();
  // Daemon shutdown, second part (after the server stopped): running execs end as
  // interrupted, every running VM is left running (detached) for the next aboxd to re-attach.
  // Calls EndCreates first if it was not. Idempotent.
  void Shutdown();

  // Tests: called before each create step (see Pipeline::Injector); the step names are
  // kCreateSteps.
  void set_create_injector(Pipeline::Injector injector);
  static const std::vector<std::string>& CreateStepNames();

 private:
  friend struct CreateJob;
  // Admits a checked create (create_pipeline.cc).
  void Launch(SandboxSpec spec, AcceptedFn accepted, DoneFn done);
  // The image files a create or restore boots (tests may pin them).
  absl::StatusOr<image::ImageFiles> OpenImage(const std::string& name);
  // Saves `live`'s VM into the checkpoint store as `request` says (its sandbox id, image and size
  // from `record`), its tools leased meanwhile. Callers hold snapshot_mu_.
  absl::StatusOr<CheckpointInfo> SaveCheckpoint(const store::SandboxRecord& record,
                                                LiveSandbox& live, CheckpointRequest request);
  // Starts checkpoint `c` of `record` in a new VM reporting through `hooks`, its run dir the
  // first free of "<id>" (first_n 0) or "<id>.<n>" from first_n on, and gives the guest a fresh
  // identity (a VM that does not take it is destroyed). Restore and resume.
  absl::StatusOr<BootedVm> StartFromCheckpoint(const store::SandboxRecord& record,
                                               const image::ImageFiles& files,
                                               const CheckpointInfo& c, int first_n,
                                               std::shared_ptr<VmHooks> hooks);
  // Makes `record` (paused, stopped or failed: no VM) ready again from checkpoint `c`: reserves
  // its capacity (pooled VMs give way), starts its egress proxy, starts the checkpoint in a new
  // VM with a fresh identity, records it (and, with restore_workspace, the checkpoint's
  // workspace base), and records `ready` with `payload()` in the transition's event. Undone on
  // failure: the sandbox stays as it was. Callers hold resume_mu_.
  absl::Status BringBack(const store::SandboxRecord& record, const image::ImageFiles& files,
                         const CheckpointInfo& c, bool restore_workspace,
                         const std::function<nlohmann::json()>& payload);
  // Restore of a stopped or failed sandbox (see Restore).
  absl::StatusOr<SandboxView> RestoreStopped(const store::SandboxRecord& record,
                                             const CheckpointInfo& c);
  // The running sandbox `ref` with its live side, if snapshots are possible for it now.
  absl::StatusOr<std::pair<store::SandboxRecord, std::shared_ptr<LiveSandbox>>> ForSnapshot(
      absl::string_view ref);
  // Builds the create's steps (create_pipeline.cc).
  void AddCreateSteps(const std::shared_ptr<CreateJob>& job);
  // The view of a sandbox the API returns.
  api::SandboxLive LiveOf(const store::SandboxRecord& record);
  // paused -> stopped: its saved state goes.
  absl::StatusOr<SandboxView> StopPaused(const store::SandboxRecord& record,
                                         nlohmann::json stopped_payload);
  // ready -> stopping, teardown, stopping -> stopped with `stopped_payload`.
  absl::Status StopLive(const std::shared_ptr<LiveSandbox>& live, const std::string& reason,
                        nlohmann::json stopped_payload);
  // Ends every exec with `reason`, tears the VM down (or detaches it), stops its egress,
  // forgets it and (unless detached) releases its capacity.
  absl::Status TearDown(const std::shared_ptr<LiveSandbox>& live, const std::string& reason,
                        bool detach);
  void OnAgentFailure(const std::string& id, int generation, const absl::Status& status);
  // Part of Recover: kills and removes run dirs "<id>" / "<id>.<n>" of recorded sandboxes that
  // their record does not name.
  void CollectOrphanVms();
  // The agent's failure callback for sandbox `id`'s VM number `generation` (see
  // LiveSandbox::generation): moves the work to the timer thread.
  std::function<void(const absl::Status&)> FailureCallback(const std::string& id,
                                                           int generation = 0);

  SandboxContext* ctx_;
  GuestToolsGate* gate_;
  SetupRunner* setup_;
  BackgroundTasks tasks_;
  std::mutex mu_;
  // One checkpoint or restore at a time (each pauses a VM and writes a lot to disk).
  std::mutex snapshot_mu_;
  // One resume at a time (an exec and a resume of one paused sandbox resume it once).
  std::mutex resume_mu_;
  std::map<std::string, std::weak_ptr<CreateJob>> creating_;  // creates past admission
  std::string last_accel_;
  bool shut_down_ = false;  // EndCreates ran
  bool detached_ = false;   // Shutdown ran
  Pipeline::Injector injector_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace abox::daemon
