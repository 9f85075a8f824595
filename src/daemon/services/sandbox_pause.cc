// SandboxService: pause to disk and resume. A pause saves the sandbox's whole state (memory,
// processes, devices, disk) as a checkpoint marked `pause`, then ends its VM, its egress proxy
// and its reservation; the record says `paused` and survives aboxd restarts and host reboots.
// A resume (or a command started in it) restores that checkpoint into a new VM, which takes a
// fresh identity (the clock is now, not the pause's) before anything runs.
#include <filesystem>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"
#include "src/daemon/lifecycle/transitions.h"
#include "src/daemon/lifecycle/vm_booter.h"
#include "src/daemon/services/sandbox_service.h"
#include "src/runtime/guest_identity.h"

namespace abox::daemon {
namespace {

// The newest pause checkpoint of a sandbox, if any.
std::optional<CheckpointInfo> NewestPause(CheckpointStore& store, const std::string& id) {
  std::optional<CheckpointInfo> newest;
  for (CheckpointInfo& c : store.List(id)) {
    if (c.pause) {
      newest = std::move(c);  // List is oldest first
    }
  }
  return newest;
}

// Pause checkpoints of `id` other than `keep_id` that no VM stands on any more.
void RemoveOldPauses(CheckpointStore& store, const std::string& id, const std::string& keep_id) {
  for (const CheckpointInfo& c : store.List(id)) {
    if (c.pause && c.id != keep_id) {
      if (absl::Status s = store.Remove(c); !s.ok()) {
        spdlog::debug("{}: keeping pause checkpoint {}: {}", id, c.id, s.ToString());
      }
    }
  }
}

}  // namespace

absl::StatusOr<SandboxView> SandboxService::Pause(absl::string_view ref, const std::string& why) {
  if (ctx_->checkpoints == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "the ", ctx_->vmm->name(), " VMM cannot save sandboxes: pause is not possible"));
  }
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  Decision d = Decide(Operation::kPause, record);
  if (d.verdict == Verdict::kAlreadyDone) {
    return SandboxView{record, LiveOf(record)};
  }
  if (d.verdict == Verdict::kRefuse) {
    return d.refusal;
  }
  std::shared_ptr<LiveSandbox> live = ctx_->registry->Find(record.id);
  if (live == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(StateText(record), " but has no VM right now: retry in a moment"));
  }
  const std::string id = record.id;
  std::lock_guard one_at_a_time(snapshot_mu_);
  CheckpointRequest request;
  request.pause = true;  // the VM stays paused after the save: nothing runs past it
  absl::StatusOr<CheckpointInfo> saved = SaveCheckpoint(record, *live, std::move(request));
  if (!saved.ok()) {
    return absl::Status(
        saved.status().code(),
        absl::StrCat("sandbox ", id, " was not paused: ", saved.status().message()));
  }
  if (!live->BeginStop()) {
    // A stop or a failure got there first: it ends the VM; the save is of no use.
    (void)ctx_->checkpoints->Remove(*saved);
    return absl::FailedPreconditionError(
        absl::StrCat(StateText(record), " and stopping: it was not paused"));
  }
  // Recorded before the VM goes: a crash in between leaves a paused record whose leftover VM
  // the next aboxd kills (Recover), never a ready record without a VM.
  nlohmann::json payload = {{"checkpoint", saved->id},
                            {"bytes", saved->bytes},
                            {"save_ms", saved->save_ms},
                            {"reason", why}};
  absl::Status recorded = ctx_->recorder->Transition(id, SandboxState::kReady,
                                                     SandboxState::kPaused, std::move(payload));
  ctx_->recorder->Note(TearDown(live, "the sandbox was paused", /*detach=*/false),
                       absl::StrCat("ending the VM of paused sandbox ", id));
  if (!recorded.ok()) {
    ctx_->recorder->Note(ctx_->recorder->Transition(id, SandboxState::kReady, SandboxState::kFailed,
                                                    {{"error", recorded.ToString()}},
                                                    std::string(recorded.message())),
                         absl::StrCat("recording that sandbox ", id, " failed"));
    return recorded;
  }
  spdlog::info("paused sandbox {} ({} MiB saved in {} ms): {}", id, saved->bytes >> 20,
               saved->save_ms, why);
  // The previous pause's checkpoint (the VM that stood on it is gone; this one copied its disk).
  RemoveOldPauses(*ctx_->checkpoints, id, saved->id);
  return Get(id);
}

absl::StatusOr<SandboxView> SandboxService::Resume(absl::string_view ref) {
  if (ctx_->checkpoints == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("the ", ctx_->vmm->name(), " VMM cannot restore sandboxes"));
  }
  // One resume at a time: two commands started in one paused sandbox resume it once.
  std::lock_guard one_at_a_time(resume_mu_);
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  Decision d = Decide(Operation::kResume, record);
  if (d.verdict == Verdict::kAlreadyDone) {
    return SandboxView{record, LiveOf(record)};
  }
  if (d.verdict == Verdict::kRefuse) {
    return d.refusal;
  }
  const std::string id = record.id;
  std::optional<CheckpointInfo> c = NewestPause(*ctx_->checkpoints, id);
  if (!c) {
    std::string why = absl::StrCat("its saved state is gone (no pause checkpoint in ",
                                   (ctx_->layout.home / "checkpoints" / id).string(), ")");
    ctx_->recorder->Note(ctx_->recorder->Transition(id, SandboxState::kPaused,
                                                    SandboxState::kFailed, {{"error", why}}, why),
                         absl::StrCat("recording that sandbox ", id, " failed"));
    return absl::FailedPreconditionError(absl::StrCat("sandbox ", id, " cannot be resumed: ", why,
                                                      "; remove it (abox rm ", id, ")"));
  }
  ABOX_ASSIGN_OR_RETURN(image::ImageFiles files, OpenImage(record.image));
  absl::Time started = absl::Now();
  absl::Status back = BringBack(record, files, *c, /*restore_workspace=*/false, [&] {
    return nlohmann::json{{"checkpoint", c->id},
                          {"resume_ms", absl::ToInt64Milliseconds(absl::Now() - started)}};
  });
  if (!back.ok()) {
    return absl::Status(back.code(),
                        absl::StrCat("sandbox ", id, " stays paused: ", back.message()));
  }
  spdlog::info("resumed sandbox {} from {}", id, c->id);
  return Get(id);
}

absl::Status SandboxService::BringBack(const store::SandboxRecord& record,
                                       const image::ImageFiles& files, const CheckpointInfo& c,
                                       bool restore_workspace,
                                       const std::function<nlohmann::json()>& payload) {
  const std::string& id = record.id;
  // Everything below is undone, in reverse, unless the sandbox is ready again.
  ABOX_RETURN_IF_ERROR(ctx_->pool != nullptr
                           ? ctx_->pool->ReserveGivingWay(id, record.cpus, record.memory_mib)
                           : ctx_->ledger->Reserve(id, record.cpus, record.memory_mib));
  absl::Cleanup release = [&] { ctx_->ledger->Release(id); };
  if (ctx_->egress != nullptr) {
    if (absl::Status s = ctx_->egress->Start(id); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("egress could not start: ", s.message()));
    }
  }
  absl::Cleanup stop_egress = [&] {
    if (ctx_->egress != nullptr) {
      ctx_->egress->Stop(id);
    }
  };
  // Its own run dir if free, else "<id>.<n>" (a crash may have left the old one); the guest
  // takes a fresh identity (the clock is the checkpoint's until then).
  auto hooks = std::make_shared<VmHooks>();
  ABOX_ASSIGN_OR_RETURN(BootedVm booted, StartFromCheckpoint(record, files, c, 0, hooks));
  absl::Cleanup destroy = [&] { (void)booted.vm->Destroy(); };
  const std::string run_dir = booted.vm->vm().run_dir();
  const int64_t pid = booted.vm->vm().pid();
  ABOX_RETURN_IF_ERROR(ctx_->sandboxes->SetRunDir(id, run_dir));
  ABOX_RETURN_IF_ERROR(ctx_->sandboxes->SetVm(id, pid, record.accel));
  if (restore_workspace && c.workspace && ctx_->workspaces != nullptr) {
    ABOX_RETURN_IF_ERROR(ctx_->workspaces->RestoreStateFrom(id, c.workspace_dir()));
  }
  ABOX_ASSIGN_OR_RETURN(std::shared_ptr<LiveSandbox> live, ctx_->registry->Add(id));
  // The live sandbox owns the VM, its reservation and its proxy from here on (a failure below
  // tears them down through it), and takes the VM before the record says ready: a stop that sees
  // "ready" finds a VM to stop.
  std::move(destroy).Cancel();
  std::move(stop_egress).Cancel();
  std::move(release).Cancel();
  live->Adopt(std::move(booted.vm));
  hooks->Route(FailureCallback(id, live->generation()),
               ctx_->egress != nullptr ? ctx_->egress->TunnelHandler(id) : nullptr);
  if (absl::Status ready =
          ctx_->recorder->Transition(id, record.state, SandboxState::kReady, payload());
      !ready.ok()) {
    ctx_->recorder->Note(TearDown(live, "it could not be made ready again", /*detach=*/false),
                         absl::StrCat("ending the VM of ", id));
    return ready;
  }
  ctx_->recorder->Note(ctx_->sandboxes->Touch(id), absl::StrCat("starting ", id, " again"));
  return absl::OkStatus();
}

absl::StatusOr<SandboxView> SandboxService::StopPaused(const store::SandboxRecord& record,
                                                       nlohmann::json stopped_payload) {
  ABOX_RETURN_IF_ERROR(ctx_->recorder->Transition(
      record.id, SandboxState::kPaused, SandboxState::kStopped, std::move(stopped_payload)));
  if (ctx_->checkpoints != nullptr) {
    RemoveOldPauses(*ctx_->checkpoints, record.id, "");  // a stopped sandbox never resumes
  }
  return Get(record.id);
}

}  // namespace abox::daemon
