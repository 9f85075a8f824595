// SandboxService::Create: the steps of a create, each with its undo. The first five admit the
// request on the caller's thread; the rest boot, sync and set up on a thread of their own. A
// failure before "announce" leaves nothing (the record is deleted unseen); after it, the
// sandbox is left failed with the reason (and its workspace state, which rm removes), and
// everything else (VM, proxy, capacity, live entry) is undone.
#include <condition_variable>
#include <optional>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"
#include "src/daemon/lifecycle/vm_booter.h"
#include "src/daemon/services/create_job.h"
#include "src/daemon/services/sandbox_service.h"
#include "src/proto/messages.h"
#include "src/runtime/guest_identity.h"

namespace abox::daemon {

namespace {

constexpr char kReserve[] = "reserve";
constexpr char kRecord[] = "record";
constexpr char kGrant[] = "grant-secrets";
constexpr char kBindWorkspace[] = "bind-workspace";
constexpr char kSetPolicy[] = "set-policy";
constexpr char kAnnounce[] = "announce";
constexpr char kStartEgress[] = "start-egress";
constexpr char kBootVm[] = "boot-vm";
constexpr char kIdentity[] = "identity";
constexpr char kTrustCa[] = "trust-ca";
constexpr char kSyncWorkspace[] = "sync-workspace";
constexpr char kSetup[] = "setup";
constexpr char kReady[] = "ready";

// A VM the create took from the pool and did not adopt (the create was refused or ended before
// its boot step): destroyed, never given back, and its reservation released. No-op otherwise.
void DropPooled(SandboxContext* ctx, CreateJob* j) {
  if (!j->pooled) {
    return;
  }
  ctx->ledger->Release(j->id);
  ctx->pool->Discard(*std::move(j->pooled));
  j->pooled.reset();
}

}  // namespace

const std::vector<std::string>& SandboxService::CreateStepNames() {
  static const auto* const names = new std::vector<std::string>{
      kReserve, kRecord,   kGrant,   kBindWorkspace, kSetPolicy, kAnnounce, kStartEgress,
      kBootVm,  kIdentity, kTrustCa, kSyncWorkspace, kSetup,     kReady};
  return *names;
}

void SandboxService::AddCreateSteps(const std::shared_ptr<CreateJob>& job) {
  CreateJob* j = job.get();  // the steps live in the job's pipeline: they never outlive it
  SandboxContext* ctx = ctx_;
  const api::SandboxCreate& request = j->spec.request;
  Pipeline& p = j->pipeline;

  p.Add(
      kReserve,
      [ctx, j]() -> absl::Status {
        if (j->pooled) {
          return absl::OkStatus();  // the pool reserved it, under this id
        }
        if (ctx->pool != nullptr) {
          // Idle pooled VMs give way to a sandbox someone asked for.
          return ctx->pool->ReserveGivingWay(j->id, j->record.cpus, j->record.memory_mib);
        }
        return ctx->ledger->Reserve(j->id, j->record.cpus, j->record.memory_mib);
      },
      [ctx, j](const absl::Status&) {
        DropPooled(ctx, j);
        ctx->ledger->Release(j->id);
      });

  p.Add(
      kRecord,
      [ctx, j]() -> absl::Status {
        ABOX_ASSIGN_OR_RETURN(j->record, ctx->recorder->Insert(j->record));
        return absl::OkStatus();
      },
      [ctx, j](const absl::Status& why) {
        if (!j->announced) {
          ctx->recorder->Note(ctx->recorder->Withdraw(j->id),
                              absl::StrCat("deleting the record of refused create ", j->id));
          return;
        }
        std::string reason(why.message());
        ctx->recorder->Note(
            ctx->recorder->Transition(j->id, SandboxState::kCreating, SandboxState::kFailed,
                                      {{"error", reason}}, reason),
            absl::StrCat("recording that sandbox ", j->id, " failed"));
      });

  if (!j->spec.grants.empty()) {
    // No undo: the grants go with the record (deleted, or kept with the failed sandbox).
    p.Add(kGrant, [ctx, j] { return ctx->grants->Record(j->id, j->spec.grants); });
  }

  const std::optional<CheckpointInfo>& fork_of = j->spec.from_checkpoint;
  if (j->spec.binding || (fork_of && fork_of->workspace)) {
    p.Add(
        kBindWorkspace,
        [ctx, j] {
          // A fork's workspace state is a copy of its checkpoint's (its base as it was then).
          const std::optional<CheckpointInfo>& ck = j->spec.from_checkpoint;
          return ck ? ctx->workspaces->BindCopy(j->id, ck->workspace_dir())
                    : ctx->workspaces->Bind(j->id, *j->spec.binding);
        },
        [ctx, j](const absl::Status&) {
          // A failed sandbox keeps its workspace state until rm, like its record.
          if (!j->announced) {
            ctx->recorder->Note(ctx->workspaces->Forget(j->id),
                                absl::StrCat("forgetting the workspace of refused create ", j->id));
          }
        });
  }
  if (j->spec.egress_policy) {
    // No undo: the policy goes with the record (deleted, or kept with the failed sandbox).
    p.Add(kSetPolicy,
          [ctx, j] { return ctx->egress->SetPolicy(EgressScope{j->id}, *j->spec.egress_policy); });
  }

  p.Add(
      kAnnounce,
      [ctx, j]() -> absl::Status {
        ABOX_ASSIGN_OR_RETURN(j->live, ctx->registry->Add(j->id));
        j->announced = true;
        ctx->recorder->Announce(j->id, {{"name", j->record.name},
                                        {"image", j->record.image},
                                        {"cpus", j->record.cpus},
                                        {"memory_mib", j->record.memory_mib}});
        if (j->accepted) {
          j->accepted(SandboxView{j->record, {}});
        }
        return absl::OkStatus();
      },
      [ctx, j](const absl::Status&) { ctx->registry->Remove(j->id); });

  // --- from here on a thread of the create's own ---
  if (ctx->egress != nullptr) {
    // The proxy exists before the agent connects: the guest's first tunnel finds it.
    p.Add(
        kStartEgress,
        [this, ctx, j]() -> absl::Status {
          if (absl::Status s = ctx->egress->Start(j->id); !s.ok()) {
            return absl::Status(s.code(), absl::StrCat("egress could not start: ", s.message()));
          }
          j->hooks->Route(FailureCallback(j->id), ctx->egress->TunnelHandler(j->id));
          return absl::OkStatus();
        },
        [ctx, j](const absl::Status&) { ctx->egress->Stop(j->id); });
  } else {
    p.Add(kStartEgress, [this, j] {
      j->hooks->Route(FailureCallback(j->id), nullptr);  // every tunnel is reset
      return absl::OkStatus();
    });
  }

  p.Add(
      kBootVm,
      [ctx, j]() -> absl::Status {
        j->started = ctx->clock->Now();
        if (j->pooled) {
          // The record names the id now: the VM is this sandbox's, whatever happens next.
          PooledVm pooled = *std::move(j->pooled);
          j->pooled.reset();
          ctx->pool->Adopted(pooled.id);
          std::shared_ptr<VmHooks> to = j->hooks;
          pooled.booted.hooks->Route(
              [to](const absl::Status& s) { to->OnFailure(s); },
              [to](std::unique_ptr<net::TunnelStream> t) { to->OnTunnel(std::move(t)); });
          j->from_pool = true;
          j->restored = pooled.booted.restored;
          j->boot_note = std::move(pooled.booted.fallback_note);
          std::lock_guard lock(j->vm_mu);
          j->vm = std::move(pooled.booted.vm);
          return absl::OkStatus();
        }
        BootRequest boot;
        boot.vm_id = j->id;
        boot.files = j->spec.files;
        boot.cpus = j->record.cpus;
        boot.memory_mib = j->record.memory_mib;
        boot.disk_mib = j->record.disk_mib;
        boot.accel = j->spec.accel;
        boot.boot_timeout = ctx->options.boot_timeout;
        if (j->spec.from_checkpoint) {
          boot.checkpoint = &*j->spec.from_checkpoint;
        } else if (!j->spec.request.cold) {
          boot.templates = ctx->templates;
        }
        ABOX_ASSIGN_OR_RETURN(BootedVm booted, BootVm(*ctx->vmm, ctx->layout, boot, j->hooks));
        j->restored = booted.restored;
        j->boot_note = std::move(booted.fallback_note);
        std::lock_guard lock(j->vm_mu);
        j->vm = std::move(booted.vm);
        return absl::OkStatus();
      },
      [ctx, j](const absl::Status&) {
        std::unique_ptr<runtime::Sandbox> vm;
        {
          std::lock_guard lock(j->vm_mu);
          vm = std::move(j->vm);
        }
        if (vm != nullptr) {
          ctx->recorder->Note(vm->Destroy(), absl::StrCat("destroying the VM of ", j->id));
        }
      });

  // Before any command: a restored guest still has its template's (or checkpoint's) RNG state,
  // clock, hostname and machine-id. (Off only with a fake VMM, whose guest is this host.)
  p.Add(kIdentity, [ctx, j]() -> absl::Status {
    if (!ctx->options.guest_identity) {
      return absl::OkStatus();
    }
    ABOX_ASSIGN_OR_RETURN(runtime::GuestIdentity identity, runtime::NewGuestIdentity(j->id));
    absl::Status s =
        runtime::ApplyGuestIdentity(j->vm->agent(), identity, ctx->options.guest_tool_path);
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("the guest did not take its identity: ", s.message()));
    }
    return absl::OkStatus();
  });

  if (j->spec.grants.intercepts()) {
    // Before any command: TLS clients in the guest must trust the proxy's certificates for the
    // hosts the secrets are bound to. (Off with a fake VMM, whose guest is this host.)
    p.Add(kTrustCa, [ctx, j]() -> absl::Status {
      if (!ctx->options.guest_identity) {
        return absl::OkStatus();
      }
      ABOX_ASSIGN_OR_RETURN(const net::InterceptCa* ca, ctx->grants->Ca());
      return InstallGuestCa(j->vm->agent(), ca->CertificatePem());
    });
  }

  if (j->spec.binding) {
    // The first sync is part of creating: a sandbox whose workspace cannot go in is not ready.
    p.Add(kSyncWorkspace, [this, ctx, j]() -> absl::Status {
      absl::Status s = gate_->WithToolsOf(j->id, *j->vm, [&](workspace::GuestTools& tools) {
        return ctx->workspaces->Sync(j->id, tools).status();
      });
      if (!s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("the workspace could not be synced in: ", s.message()));
      }
      return absl::OkStatus();
    });
  }
  if (request.setup) {
    // After the workspace sync, so that e.g. `npm ci` finds package-lock.json.
    p.Add(kSetup, [this, j] {
      return setup_->Run(j->id, *j->vm, *j->spec.request.setup, j->spec.setup_rules);
    });
  }

  p.Add(kReady, [this, ctx, j]() -> absl::Status {
    vmm::Vm& vm = j->vm->vm();
    std::string accel_name = vmm::AccelName(vm.accel());
    ABOX_RETURN_IF_ERROR(ctx->sandboxes->SetVm(j->id, vm.pid(), accel_name));
    nlohmann::json payload = {
        {"accel", accel_name},
        {"boot_ms", absl::ToInt64Milliseconds(ctx->clock->Now() - j->started)},
        {"started_from", j->from_pool  ? "pool"
                         : j->restored ? "snapshot"
                                       : "boot"}};
    if (!j->boot_note.empty()) {
      payload["snapshot_note"] = j->boot_note;
    }
    // Where the time went, step by step (the ready step itself not yet done).
    nlohmann::json steps = nlohmann::json::object();
    for (const auto& [name, ms] : j->pipeline.step_ms()) {
      steps[name] = static_cast<int64_t>(ms + 0.5);
    }
    payload["steps_ms"] = std::move(steps);
    if (!vm.accel_note().empty()) {
      payload["accel_note"] = vm.accel_note();
    }
    // The live sandbox takes the VM before the record says ready: a stop that sees "ready"
    // finds a VM to stop.
    {
      std::lock_guard lock(j->vm_mu);
      j->live->Adopt(std::move(j->vm));
    }
    absl::Status ready = ctx->recorder->Transition(j->id, SandboxState::kCreating,
                                                   SandboxState::kReady, std::move(payload));
    if (!ready.ok()) {
      // The live sandbox holds the VM now: it goes with it (the boot step's undo finds none).
      ctx->recorder->Note(j->live->TearDown("the create failed", /*detach=*/false),
                          absl::StrCat("destroying the VM of ", j->id));
      return ready;
    }
    std::lock_guard lock(mu_);
    last_accel_ = accel_name;
    return absl::OkStatus();
  });
}

void SandboxService::set_create_injector(Pipeline::Injector injector) {
  std::lock_guard lock(mu_);
  injector_ = std::move(injector);
}

void SandboxService::Create(const api::SandboxCreate& request, AcceptedFn accepted, DoneFn done) {
  ImageOpener open_image = [this](const std::string& name) -> absl::StatusOr<image::ImageFiles> {
    if (ctx_->options.image_files) {
      return *ctx_->options.image_files;
    }
    return image::OpenImageForBoot(ctx_->layout, name, proto::kProtocolVersion);
  };
  absl::StatusOr<SandboxSpec> spec = ValidateCreate(
      request, open_image,
      {.workspaces = ctx_->workspaces != nullptr, .egress = ctx_->egress != nullptr});
  if (!spec.ok()) {
    return done(spec.status());
  }
  if (!request.secrets.empty() || !request.git_push.empty() || !request.models.empty()) {
    if (ctx_->grants == nullptr) {
      return done(absl::UnimplementedError("this aboxd cannot give sandboxes secrets"));
    }
    absl::StatusOr<store::SandboxGrants> grants = ctx_->grants->Prepare(request);
    if (!grants.ok()) {
      return done(grants.status());
    }
    spec->grants = *std::move(grants);
    // The grants' hosts are allowed too, on top of the sandbox's own rules (or the global
    // policy's, which a sandbox without its own inherits).
    absl::StatusOr<std::vector<net::Rule>> rules = ctx_->grants->RulesFor(spec->grants);
    if (!rules.ok()) {
      return done(rules.status());
    }
    if (rules->empty()) {
      Launch(*std::move(spec), std::move(accepted), std::move(done));  // models only
      return;
    }
    net::EgressPolicy& own =
        spec->egress_policy ? *spec->egress_policy : spec->egress_policy.emplace();
    for (net::Rule& rule : *rules) {
      if (std::find(own.allow.begin(), own.allow.end(), rule) == own.allow.end()) {
        own.allow.push_back(std::move(rule));
      }
    }
  }
  Launch(*std::move(spec), std::move(accepted), std::move(done));
}

void SandboxService::Launch(SandboxSpec spec, AcceptedFn accepted, DoneFn done) {
  auto job = std::make_shared<CreateJob>();
  job->spec = std::move(spec);
  job->id = runtime::NewSandboxId();
  job->accepted = std::move(accepted);
  job->done = std::move(done);
  store::SandboxRecord& record = job->record;
  const api::SandboxCreate& req = job->spec.request;
  if (ctx_->pool != nullptr && !req.cold && !job->spec.from_checkpoint) {
    // A pooled VM of this image and shape, if one is idle; the pool keeps this shape from now on.
    PoolShape shape{.image = req.image,
                    .cpus = static_cast<int>(req.cpus),
                    .memory_mib = static_cast<int>(req.memory_mib),
                    .disk_mib = req.disk_mib,
                    .accel = job->spec.accel};
    ctx_->pool->Want(shape);
    job->pooled = ctx_->pool->Take(shape, job->spec.files);
    if (job->pooled) {
      job->id = job->pooled->id;
    }
  }
  record.id = job->id;
  record.name = req.name;
  record.image = req.image;
  record.cpus = static_cast<int>(req.cpus);
  record.memory_mib = static_cast<int>(req.memory_mib);
  record.disk_mib = job->spec.from_checkpoint ? job->spec.from_checkpoint->disk_mib : req.disk_mib;
  record.labels = req.labels;
  record.state = SandboxState::kCreating;
  record.run_dir = ctx_->layout.SandboxRunDir(job->id).string();
  record.ttl_seconds = req.ttl_seconds;
  record.idle_timeout_seconds = req.idle_timeout_seconds;
  {
    std::lock_guard lock(mu_);
    if (shut_down_) {
      DropPooled(ctx_, job.get());
      return job->done(absl::UnavailableError("aboxd is shutting down: retry once it is back"));
    }
    // Past admission, a shutdown ends the create before its next step.
    job->pipeline.set_injector([this, injected = injector_, j = job.get()](absl::string_view step) {
      if (j->announced) {
        std::lock_guard l(mu_);
        if (shut_down_) {
          return absl::UnavailableError("aboxd stopped while the sandbox was booting");
        }
      }
      return injected ? injected(step) : absl::OkStatus();
    });
  }
  AddCreateSteps(job);
  if (absl::Status admitted = job->pipeline.Run(kAnnounce); !admitted.ok()) {
    DropPooled(ctx_, job.get());  // when the reserve step itself failed (no undo ran)
    return job->done(admitted);
  }
  {
    std::lock_guard lock(mu_);
    creating_[job->id] = job;
  }
  auto finish = [this, job] {
    absl::Status s = job->pipeline.Run();
    {
      std::lock_guard lock(mu_);
      creating_.erase(job->id);
    }
    if (!s.ok()) {
      const char* how =
          job->pipeline.failed_step() == kSetup ? "failed during setup" : "failed to boot";
      return job->done(
          absl::Status(s.code(), absl::StrCat("sandbox ", job->id, " ", how, ": ", s.message())));
    }
    job->done(Get(job->id));
  };
  if (!tasks_.Spawn(finish)) {
    std::lock_guard lock(mu_);
    creating_.erase(job->id);
    job->pipeline.Abandon(absl::UnavailableError("aboxd stopped while the sandbox was booting"));
    job->done(absl::UnavailableError(
        absl::StrCat("sandbox ", job->id, " failed to boot: aboxd is shutting down")));
  }
}

absl::StatusOr<SandboxView> SandboxService::CreateAndWait(const api::SandboxCreate& request) {
  struct Outcome {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<absl::StatusOr<SandboxView>> result;
  };
  auto outcome = std::make_shared<Outcome>();
  Create(request, nullptr, [outcome](absl::StatusOr<SandboxView> r) {
    std::lock_guard lock(outcome->mu);
    outcome->result = std::move(r);
    outcome->cv.notify_all();
  });
  std::unique_lock lock(outcome->mu);
  outcome->cv.wait(lock, [&] { return outcome->result.has_value(); });
  return *std::move(outcome->result);
}

}  // namespace abox::daemon
