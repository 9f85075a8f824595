// SandboxService: checkpoint, restore and fork. A checkpoint saves a running sandbox (memory,
// devices, disk, workspace state) into CheckpointStore while it keeps running; a restore
// replaces the sandbox's VM with one restored from it; a fork restores it into new sandboxes
// through the create pipeline (its boot step restores instead of booting).
#include <condition_variable>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"
#include "src/daemon/lifecycle/transitions.h"
#include "src/daemon/lifecycle/vm_booter.h"
#include "src/daemon/services/sandbox_service.h"
#include "src/proto/messages.h"
#include "src/runtime/guest_identity.h"

namespace abox::daemon {
namespace {

constexpr int kMaxForks = 32;

nlohmann::json CheckpointPayload(const CheckpointInfo& c) {
  return {{"checkpoint", c.id}, {"name", c.name}, {"bytes", c.bytes}, {"save_ms", c.save_ms}};
}

}  // namespace

absl::StatusOr<image::ImageFiles> SandboxService::OpenImage(const std::string& name) {
  if (ctx_->options.image_files) {
    return *ctx_->options.image_files;
  }
  return image::OpenImageForBoot(ctx_->layout, name, proto::kProtocolVersion);
}

absl::StatusOr<std::pair<store::SandboxRecord, std::shared_ptr<LiveSandbox>>>
SandboxService::ForSnapshot(absl::string_view ref) {
  if (ctx_->checkpoints == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("the ", ctx_->vmm->name(),
                     " VMM cannot save sandboxes: no checkpoints, restores or forks"));
  }
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  Decision d = Decide(Operation::kSnapshot, record);
  if (d.verdict != Verdict::kAllow) {
    return d.refusal;
  }
  std::shared_ptr<LiveSandbox> live = ctx_->registry->Find(record.id);
  if (live == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(StateText(record), " but has no VM right now: retry in a moment"));
  }
  return std::make_pair(std::move(record), std::move(live));
}

absl::StatusOr<CheckpointInfo> SandboxService::Checkpoint(absl::string_view ref,
                                                          const std::string& name) {
  ABOX_ASSIGN_OR_RETURN(auto target, ForSnapshot(ref));
  auto& [record, live] = target;
  if (!name.empty()) {
    ABOX_RETURN_IF_ERROR(api::ValidateSandboxName(name));  // the same rules as sandbox names
    if (ctx_->checkpoints->Find(record.id, name).ok()) {
      return absl::AlreadyExistsError(
          absl::StrCat("sandbox ", record.id, " has a checkpoint named ", name, " already"));
    }
  }
  CheckpointRequest request;
  request.name = name;
  if (ctx_->workspaces != nullptr && ctx_->workspaces->Has(record.id)) {
    request.save_workspace = [this, id = record.id](const std::filesystem::path& dir) {
      return ctx_->workspaces->SaveStateTo(id, dir);
    };
  }
  std::lock_guard one_at_a_time(snapshot_mu_);
  ABOX_ASSIGN_OR_RETURN(CheckpointInfo c, SaveCheckpoint(record, *live, std::move(request)));
  ctx_->events->Publish(record.id, "checkpointed", CheckpointPayload(c));
  return c;
}

absl::StatusOr<CheckpointInfo> SandboxService::SaveCheckpoint(const store::SandboxRecord& record,
                                                              LiveSandbox& live,
                                                              CheckpointRequest request) {
  // The VM's tools are leased for the save: no workspace operation runs in it meanwhile.
  auto lease = live.LeaseTools(ctx_->options.max_guest_operations_per_sandbox + 1);
  if (!std::holds_alternative<LiveSandbox::ToolLease>(lease)) {
    return absl::FailedPreconditionError(
        absl::StrCat(StateText(record), ": it is stopping or busy; retry in a moment"));
  }
  request.sandbox_id = record.id;
  request.image = record.image;
  request.cpus = record.cpus;
  request.memory_mib = record.memory_mib;
  request.disk_mib = record.disk_mib;
  return ctx_->checkpoints->Save(std::get<LiveSandbox::ToolLease>(lease).sandbox(),
                                 ctx_->vmm->DiskLayers(record.run_dir), request);
}

absl::StatusOr<std::vector<CheckpointInfo>> SandboxService::Checkpoints(absl::string_view ref) {
  if (ctx_->checkpoints == nullptr) {
    return std::vector<CheckpointInfo>{};
  }
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  std::vector<CheckpointInfo> listed = ctx_->checkpoints->List(record.id);
  // A pause's saved state is the sandbox's own business, not a checkpoint the user made.
  std::erase_if(listed, [](const CheckpointInfo& c) { return c.pause; });
  return listed;
}

absl::Status SandboxService::RemoveCheckpoint(absl::string_view ref,
                                              const std::string& checkpoint) {
  if (ctx_->checkpoints == nullptr) {
    return absl::NotFoundError("there are no checkpoints");
  }
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  ABOX_ASSIGN_OR_RETURN(CheckpointInfo c, ctx_->checkpoints->Find(record.id, checkpoint));
  ABOX_RETURN_IF_ERROR(ctx_->checkpoints->Remove(c));
  ctx_->events->Publish(record.id, "checkpoint_removed", {{"checkpoint", c.id}, {"name", c.name}});
  return absl::OkStatus();
}

absl::StatusOr<SandboxView> SandboxService::Restore(absl::string_view ref,
                                                    const std::string& checkpoint) {
  if (ctx_->checkpoints == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("the ", ctx_->vmm->name(), " VMM cannot restore sandboxes"));
  }
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord found, ctx_->sandboxes->Resolve(ref));
  Decision d = Decide(Operation::kRestore, found);
  if (d.verdict != Verdict::kAllow) {
    return d.refusal;
  }
  auto matching = [&](const store::SandboxRecord& record) -> absl::StatusOr<CheckpointInfo> {
    ABOX_ASSIGN_OR_RETURN(CheckpointInfo c, ctx_->checkpoints->Find(record.id, checkpoint));
    if (c.pause) {
      return absl::NotFoundError(
          absl::StrCat("sandbox ", record.id, " has no checkpoint named ", checkpoint));
    }
    if (c.image != record.image || c.cpus != record.cpus || c.memory_mib != record.memory_mib) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", c.name, " was taken of image ", c.image, " with ", c.cpus, " CPUs and ",
          c.memory_mib, " MiB; sandbox ", record.id, " runs image ", record.image, " with ",
          record.cpus, " CPUs and ", record.memory_mib, " MiB"));
    }
    return c;
  };
  if (found.state == SandboxState::kStopped || found.state == SandboxState::kFailed) {
    ABOX_ASSIGN_OR_RETURN(CheckpointInfo c, matching(found));
    return RestoreStopped(found, c);
  }
  ABOX_ASSIGN_OR_RETURN(auto target, ForSnapshot(ref));
  auto& [record, live] = target;
  ABOX_ASSIGN_OR_RETURN(CheckpointInfo c, matching(record));
  ABOX_ASSIGN_OR_RETURN(image::ImageFiles files, OpenImage(record.image));
  std::lock_guard one_at_a_time(snapshot_mu_);
  absl::Time started = absl::Now();
  const std::string id = record.id;
  // The checkpoint comes up in a VM of its own first, beside the running one: a checkpoint that
  // does not restore (a damaged file, another QEMU) fails here and leaves the sandbox as it was.
  // Its run dir is named apart: "<id>.<n>" from the next generation on (the generation starts
  // again at 0 when aboxd restarts, but the run dir of an earlier restore may be live).
  auto hooks = std::make_shared<VmHooks>();  // routed below, once it is the sandbox's VM
  ABOX_ASSIGN_OR_RETURN(BootedVm booted,
                        StartFromCheckpoint(record, files, c, live->generation() + 1, hooks));
  std::unique_ptr<runtime::Sandbox> fresh = std::move(booted.vm);
  const std::string run_dir = fresh->vm().run_dir();
  const int64_t pid = fresh->vm().pid();
  // The record names the new VM before the old one ends: if aboxd dies at any point, the next
  // one re-attaches to the VM the record names and kills the other (CollectOrphanVms), so the
  // sandbox is either as it was or restored. The workspace base follows before the switch too.
  absl::Status switched = ctx_->sandboxes->SetRunDir(id, run_dir);
  if (switched.ok()) {
    switched = ctx_->sandboxes->SetVm(id, pid, record.accel);
  }
  if (switched.ok() && c.workspace && ctx_->workspaces != nullptr) {
    switched = ctx_->workspaces->RestoreStateFrom(id, c.workspace_dir());
  }
  if (!switched.ok()) {
    // The old VM still runs: it stays the sandbox's.
    (void)fresh->Destroy();
    ctx_->recorder->Note(ctx_->sandboxes->SetRunDir(id, record.run_dir),
                         absl::StrCat("restoring the run dir of ", id));
    ctx_->recorder->Note(ctx_->sandboxes->SetVm(id, record.vmm_pid, record.accel),
                         absl::StrCat("restoring the VM of ", id));
    return absl::Status(switched.code(), absl::StrCat("restoring checkpoint ", c.name,
                                                      " failed (the sandbox is as "
                                                      "it was): ",
                                                      switched.message()));
  }
  absl::Status replaced = live->Replace(
      absl::StrCat("the sandbox was restored to checkpoint ", c.name),
      [&]() -> absl::StatusOr<std::unique_ptr<runtime::Sandbox>> { return std::move(fresh); });
  if (replaced.ok()) {
    // Failures of the old VM are stale now (its generation is past); the new one's count.
    hooks->Route(FailureCallback(id, live->generation()),
                 ctx_->egress != nullptr ? ctx_->egress->TunnelHandler(id) : nullptr);
  }
  if (!replaced.ok()) {
    std::string why =
        absl::StrCat("restoring checkpoint ", c.name, " failed: ", replaced.message());
    spdlog::warn("{}: {}", id, why);
    ctx_->recorder->Note(TearDown(live, why, /*detach=*/false),
                         absl::StrCat("tearing down sandbox ", id));
    ctx_->recorder->Note(ctx_->recorder->Transition(id, SandboxState::kReady, SandboxState::kFailed,
                                                    {{"error", why}}, why),
                         absl::StrCat("recording that sandbox ", id, " failed"));
    return absl::Status(replaced.code(), why);
  }
  nlohmann::json payload = CheckpointPayload(c);
  payload["restore_ms"] = absl::ToInt64Milliseconds(absl::Now() - started);
  ctx_->events->Publish(id, "restored", payload);
  return Get(id);
}

absl::StatusOr<SandboxView> SandboxService::RestoreStopped(const store::SandboxRecord& found,
                                                           const CheckpointInfo& c) {
  std::lock_guard one_at_a_time(resume_mu_);
  // Again under the lock: a concurrent restore or remove may have come first.
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Get(found.id));
  if (record.state != SandboxState::kStopped && record.state != SandboxState::kFailed) {
    return absl::FailedPreconditionError(
        absl::StrCat(StateText(record), ": it was started again meanwhile"));
  }
  ABOX_ASSIGN_OR_RETURN(image::ImageFiles files, OpenImage(record.image));
  absl::Time started = absl::Now();
  absl::Status back = BringBack(record, files, c, /*restore_workspace=*/true, [&] {
    nlohmann::json payload = CheckpointPayload(c);
    payload["restore_ms"] = absl::ToInt64Milliseconds(absl::Now() - started);
    payload["was"] = store::SandboxStateName(record.state);
    return payload;
  });
  if (!back.ok()) {
    return absl::Status(
        back.code(),
        absl::StrCat("restoring checkpoint ", c.name, " failed (sandbox ", record.id, " stays ",
                     store::SandboxStateName(record.state), "): ", back.message()));
  }
  spdlog::info("sandbox {} runs again from checkpoint {}", record.id, c.id);
  return Get(record.id);
}

absl::StatusOr<BootedVm> SandboxService::StartFromCheckpoint(const store::SandboxRecord& record,
                                                             const image::ImageFiles& files,
                                                             const CheckpointInfo& c, int first_n,
                                                             std::shared_ptr<VmHooks> hooks) {
  const std::string& id = record.id;
  // The first free run dir: "<id>" (first_n 0) or "<id>.<n>" from n = first_n.
  std::string vm_id = first_n == 0 ? id : absl::StrCat(id, ".", first_n);
  std::error_code ec;
  for (int n = std::max(first_n, 0) + 1;
       std::filesystem::exists(ctx_->layout.SandboxRunDir(vm_id), ec); ++n) {
    vm_id = absl::StrCat(id, ".", n);
  }
  BootRequest boot;
  boot.vm_id = vm_id;
  boot.files = files;
  boot.cpus = record.cpus;
  boot.memory_mib = record.memory_mib;
  boot.disk_mib = record.disk_mib;
  boot.boot_timeout = ctx_->options.boot_timeout;
  boot.checkpoint = &c;
  ABOX_ASSIGN_OR_RETURN(BootedVm booted, BootVm(*ctx_->vmm, ctx_->layout, boot, std::move(hooks)));
  if (ctx_->options.guest_identity) {
    // The clock is the checkpoint's, and its RNG state that of every other restore of it.
    absl::StatusOr<runtime::GuestIdentity> identity = runtime::NewGuestIdentity(id);
    absl::Status applied = identity.ok()
                               ? runtime::ApplyGuestIdentity(booted.vm->agent(), *identity,
                                                             ctx_->options.guest_tool_path)
                               : identity.status();
    if (!applied.ok()) {
      (void)booted.vm->Destroy();
      return absl::Status(applied.code(), absl::StrCat("the restored guest did not take its "
                                                       "identity: ",
                                                       applied.message()));
    }
  }
  return booted;
}

absl::StatusOr<std::vector<SandboxView>> SandboxService::Fork(absl::string_view ref, int count,
                                                              const std::string& name_prefix) {
  if (count < 1 || count > kMaxForks) {
    return absl::InvalidArgumentError(
        absl::StrCat("a fork makes 1 to ", kMaxForks, " sandboxes, not ", count));
  }
  if (!name_prefix.empty()) {
    ABOX_RETURN_IF_ERROR(api::ValidateSandboxName(absl::StrCat(name_prefix, "-", count)));
  }
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  ABOX_ASSIGN_OR_RETURN(CheckpointInfo c, Checkpoint(record.id, ""));
  ABOX_ASSIGN_OR_RETURN(image::ImageFiles files, OpenImage(record.image));
  std::optional<net::EgressPolicy> policy;
  if (ctx_->egress != nullptr) {
    ABOX_ASSIGN_OR_RETURN(policy, ctx_->egress->Policy(EgressScope{record.id}));
  }
  struct Outcomes {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::optional<absl::StatusOr<SandboxView>>> results;
    std::vector<std::string> accepted;  // every fork that got a record, up or not
    int left = 0;
  };
  auto outcomes = std::make_shared<Outcomes>();
  outcomes->results.resize(static_cast<size_t>(count));
  outcomes->left = count;
  for (int i = 0; i < count; ++i) {
    SandboxSpec spec;
    spec.request.image = record.image;
    spec.request.cpus = record.cpus;
    spec.request.memory_mib = record.memory_mib;
    spec.request.disk_mib = record.disk_mib;
    spec.request.labels = record.labels;
    spec.request.labels["abox.fork-of"] = record.id;
    spec.request.ttl_seconds = record.ttl_seconds;
    spec.request.idle_timeout_seconds = record.idle_timeout_seconds;
    if (!name_prefix.empty()) {
      spec.request.name = absl::StrCat(name_prefix, "-", i + 1);
    }
    spec.files = files;
    spec.egress_policy = policy;
    spec.from_checkpoint = c;
    auto accepted = [outcomes](const SandboxView& v) {
      std::lock_guard lock(outcomes->mu);
      outcomes->accepted.push_back(v.record.id);
    };
    Launch(std::move(spec), accepted, [outcomes, i](absl::StatusOr<SandboxView> r) {
      std::lock_guard lock(outcomes->mu);
      outcomes->results[static_cast<size_t>(i)] = std::move(r);
      --outcomes->left;
      outcomes->cv.notify_all();
    });
  }
  std::unique_lock lock(outcomes->mu);
  outcomes->cv.wait(lock, [&] { return outcomes->left == 0; });
  std::vector<SandboxView> made;
  absl::Status first_failure;
  for (auto& r : outcomes->results) {
    if (r->ok()) {
      made.push_back(**std::move(r));
    } else if (first_failure.ok()) {
      first_failure = r->status();
    }
  }
  nlohmann::json ids = nlohmann::json::array();
  for (const SandboxView& v : made) {
    ids.push_back(v.record.id);
  }
  if (!first_failure.ok()) {
    // All or nothing: every fork is removed (those that came up and those left failed), so the
    // caller is left with no sandbox it was not told about.
    for (const std::string& fork : outcomes->accepted) {
      ctx_->recorder->Note(Remove(fork, /*force=*/true),
                           absl::StrCat("removing fork ", fork, " of a failed fork"));
    }
    ctx_->events->Publish(record.id, "fork_failed",
                          {{"checkpoint", c.id}, {"asked", count}, {"came_up", made.size()}});
    return absl::Status(first_failure.code(),
                        absl::StrCat(made.size(), " of ", count,
                                     " forks came up and were removed again; the first failure: ",
                                     first_failure.message()));
  }
  ctx_->events->Publish(record.id, "forked",
                        {{"checkpoint", c.id}, {"sandboxes", ids}, {"asked", count}});
  return made;
}

}  // namespace abox::daemon
