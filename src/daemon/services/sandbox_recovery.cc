// SandboxService across aboxd restarts: Recover at start, Shutdown at the end.
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"
#include "src/base/fenced_remove.h"
#include "src/base/status_macros.h"
#include "src/daemon/services/create_job.h"
#include "src/daemon/services/sandbox_service.h"

namespace abox::daemon {

absl::Status SandboxService::Recover() {
  ABOX_ASSIGN_OR_RETURN(int64_t interrupted,
                        ctx_->execs->MarkAllRunningAsInterrupted(
                            "aboxd stopped while the command was running; its output up to "
                            "then is kept"));
  if (interrupted > 0) {
    spdlog::info("recovery: {} exec(s) were running when aboxd stopped: marked interrupted",
                 interrupted);
  }
  // A paused sandbox has no VM; one a crash left between the pause's record and the VM's end
  // is killed now (its state is saved).
  store::SandboxFilter paused_filter;
  paused_filter.states = {SandboxState::kPaused};
  ABOX_ASSIGN_OR_RETURN(std::vector<store::SandboxRecord> paused,
                        ctx_->sandboxes->List(paused_filter));
  for (const store::SandboxRecord& r : paused) {
    if (auto vm = ctx_->vmm->Attach(r.run_dir); vm.ok()) {
      ctx_->recorder->Note((*vm)->Kill(),
                           absl::StrCat("recovery: killing the VM of paused ", r.id));
    }
  }
  store::SandboxFilter filter;
  filter.states = {SandboxState::kCreating, SandboxState::kReady, SandboxState::kStopping};
  ABOX_ASSIGN_OR_RETURN(std::vector<store::SandboxRecord> records, ctx_->sandboxes->List(filter));
  for (const store::SandboxRecord& r : records) {
    if (r.state != SandboxState::kReady) {
      // A boot or a stop was cut short: finish the VM off, whatever state it is in.
      if (auto vm = ctx_->vmm->Attach(r.run_dir); vm.ok()) {
        ctx_->recorder->Note((*vm)->Kill(), absl::StrCat("recovery: killing the VM of ", r.id));
      }
      if (r.state == SandboxState::kCreating) {
        std::string why = "aboxd stopped while the sandbox was booting";
        ctx_->recorder->Note(
            ctx_->recorder->Transition(r.id, SandboxState::kCreating, SandboxState::kFailed,
                                       {{"reason", why}}, why),
            absl::StrCat("recovery: ", r.id));
      } else {
        ctx_->recorder->Note(
            ctx_->recorder->Transition(r.id, SandboxState::kStopping, SandboxState::kStopped,
                                       {{"reason", "aboxd stopped while stopping it"}}),
            absl::StrCat("recovery: ", r.id));
      }
      continue;
    }
    // A VM the previous aboxd paused for a checkpoint (or a pause) and never let run again, because
    // it died in the middle: it runs again now, so that its agent answers the attach below. (A
    // running VM ignores this.)
    if (auto vm = ctx_->vmm->Attach(r.run_dir); vm.ok()) {
      if (absl::Status resumed = (*vm)->Resume();
          !resumed.ok() && !absl::IsUnimplemented(resumed)) {
        spdlog::debug("recovery: {}: resume: {}", r.id, resumed.ToString());
      }
      (void)(*vm)->Detach();
    }
    auto hooks = std::make_shared<VmHooks>();
    bool egress_on = false;
    if (ctx_->egress != nullptr) {
      if (absl::Status s = ctx_->egress->Start(r.id); s.ok()) {
        egress_on = true;
      } else {
        spdlog::warn("recovery: {}: egress is off for it: {}", r.id, s.ToString());
      }
    }
    hooks->Route(FailureCallback(r.id), egress_on ? ctx_->egress->TunnelHandler(r.id) : nullptr);
    absl::StatusOr<std::unique_ptr<runtime::Sandbox>> sandbox = runtime::Sandbox::Attach(
        *ctx_->vmm, r.id, r.run_dir, ctx_->options.attach_timeout,
        [hooks](const absl::Status& s) { hooks->OnFailure(s); },
        [hooks](std::unique_ptr<net::TunnelStream> t) { hooks->OnTunnel(std::move(t)); },
        ctx_->layout);
    if (!sandbox.ok()) {
      if (egress_on) {
        ctx_->egress->Stop(r.id);
      }
      std::string why = absl::StrCat("the sandbox died while aboxd was not running: ",
                                     sandbox.status().message());
      spdlog::warn("recovery: {}: {}", r.id, why);
      ctx_->recorder->Note(ctx_->recorder->Transition(r.id, SandboxState::kReady,
                                                      SandboxState::kFailed, {{"error", why}}, why),
                           absl::StrCat("recovery: ", r.id));
      continue;
    }
    ctx_->recorder->Note(ctx_->ledger->Reserve(r.id, r.cpus, r.memory_mib, /*force=*/true),
                         absl::StrCat("recovery: reserving what ", r.id, " uses"));
    absl::StatusOr<std::shared_ptr<LiveSandbox>> live = ctx_->registry->Add(r.id);
    if (!live.ok()) {
      ctx_->recorder->Note(live.status(), "recovery");
      continue;
    }
    (*live)->Adopt(*std::move(sandbox));
    ctx_->recorder->Note(ctx_->sandboxes->Touch(r.id), absl::StrCat("recovery: ", r.id));
    spdlog::info("recovery: re-attached to sandbox {}", r.id);
    ctx_->events->Publish(r.id, "reattached", {{"vmm_pid", r.vmm_pid}});
  }
  CollectOrphanVms();
  return absl::OkStatus();
}

void SandboxService::CollectOrphanVms() {
  // Every record's current run dir, by sandbox id (any state).
  absl::StatusOr<std::vector<store::SandboxRecord>> all = ctx_->sandboxes->List({});
  if (!all.ok()) {
    spdlog::warn("recovery: not looking for orphan VMs: {}", all.status().ToString());
    return;
  }
  std::map<std::string, std::filesystem::path> current;
  for (const store::SandboxRecord& r : *all) {
    current[r.id] = std::filesystem::path(r.run_dir).lexically_normal();
  }
  // A VM of a known sandbox in a run dir its record does not name: a restore, resume or boot
  // the previous aboxd started and died before it recorded ("<id>" or "<id>.<n>"). It belongs
  // to no one: it goes, with its files. (Run dirs of ids without a record are not ours to
  // judge here: `abox run --direct`'s VMs, the pool's, whose leftovers the pool collects.)
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ctx_->layout.SandboxesDir(), ec)) {
    const std::string name = e.path().filename().string();
    std::string id = std::vector<std::string>(absl::StrSplit(name, absl::MaxSplits('.', 1)))[0];
    auto it = current.find(id);
    if (it == current.end() || it->second == e.path().lexically_normal()) {
      continue;
    }
    if (auto vm = ctx_->vmm->Attach(e.path().string()); vm.ok()) {
      spdlog::warn(
          "recovery: killing VM {} of sandbox {}: no record names it (aboxd died "
          "while starting it)",
          name, id);
      ctx_->recorder->Note((*vm)->Kill(), absl::StrCat("recovery: killing orphan VM ", name));
    }
    if (absl::Status s = base::RemoveUnder(ctx_->layout.home, e.path()); !s.ok()) {
      spdlog::warn("recovery: removing {}: {}", e.path().string(), s.ToString());
    }
  }
}

void SandboxService::EndCreates() {
  std::vector<std::shared_ptr<CreateJob>> creating;
  {
    std::lock_guard lock(mu_);
    if (shut_down_) {
      return;
    }
    shut_down_ = true;
    for (auto& [id, weak] : creating_) {
      if (std::shared_ptr<CreateJob> job = weak.lock()) {
        creating.push_back(std::move(job));
      }
    }
  }
  // Creates in flight end at their next step; one waiting on its guest (setup, sync) ends now.
  for (const std::shared_ptr<CreateJob>& job : creating) {
    std::lock_guard lock(job->vm_mu);
    if (job->vm != nullptr) {
      job->vm->agent().Fail(absl::CancelledError("aboxd stopped while the sandbox was booting"));
    }
  }
  creating.clear();
  tasks_.Close();
}

void SandboxService::Shutdown() {
  EndCreates();
  {
    std::lock_guard lock(mu_);
    if (detached_) {
      return;
    }
    detached_ = true;
  }
  alive_.reset();  // posted callbacks become no-ops
  if (ctx_->options.pause_on_stop && ctx_->checkpoints != nullptr) {
    for (const std::shared_ptr<LiveSandbox>& live : ctx_->registry->All()) {
      absl::StatusOr<SandboxView> paused = Pause(live->id(), "aboxd stopped (--pause-on-stop)");
      if (!paused.ok()) {
        spdlog::warn("leaving sandbox {} running instead of pausing it: {}", live->id(),
                     paused.status().ToString());
      }
    }
  }
  for (const std::shared_ptr<LiveSandbox>& live : ctx_->registry->All()) {
    absl::Status s = TearDown(live, "aboxd stopped while the command was running", true);
    if (!s.ok()) {
      spdlog::warn("leaving sandbox {} running: {}", live->id(), s.ToString());
    }
  }
}

}  // namespace abox::daemon
