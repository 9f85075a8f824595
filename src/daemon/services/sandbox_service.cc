#include "src/daemon/services/sandbox_service.h"

#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/daemon/lifecycle/transitions.h"
#include "src/vmm/shim_protocol.h"

namespace abox::daemon {

SandboxService::SandboxService(SandboxContext& ctx, GuestToolsGate& gate, SetupRunner& setup)
    : ctx_(&ctx), gate_(&gate), setup_(&setup) {}

SandboxService::~SandboxService() { Shutdown(); }

std::function<void(const absl::Status&)> SandboxService::FailureCallback(const std::string& id,
                                                                         int generation) {
  std::weak_ptr<bool> alive = alive_;
  return [this, alive, id, generation](const absl::Status& status) {
    // On the agent's I/O thread: the cleanup blocks, so it moves to the timer thread.
    if (alive.expired()) {
      return;
    }
    ctx_->timers->Post([this, alive, id, generation, status] {
      if (!alive.expired()) {
        OnAgentFailure(id, generation, status);
      }
    });
  };
}

api::SandboxLive SandboxService::LiveOf(const store::SandboxRecord& record) {
  const std::string& id = record.id;
  api::SandboxLive live;
  if (!record.run_dir.empty()) {
    // What the guest wrote (its own overlay; the image and template layers under it are shared).
    struct stat st {};
    const std::string overlay =
        (std::filesystem::path(record.run_dir) / vmm::kOverlayFile).string();
    if (::stat(overlay.c_str(), &st) == 0) {
      live.disk_used_bytes = static_cast<int64_t>(st.st_blocks) * 512;
    }
  }
  if (std::shared_ptr<LiveSandbox> sandbox = ctx_->registry->Find(id)) {
    live.running_execs = sandbox->running_execs();
  }
  if (ctx_->workspaces != nullptr) {
    live.workspace = ctx_->workspaces->Describe(id);
  }
  if (ctx_->egress != nullptr) {
    absl::StatusOr<net::EgressPolicy> egress = ctx_->egress->Effective(id);
    if (egress.ok() && egress->mode) {
      live.egress_mode = std::string(net::ModeName(*egress->mode));
    }
    if (absl::StatusOr<store::RetentionCounters> d = ctx_->egress->Dropped(id);
        d.ok() && *d != store::RetentionCounters{}) {
      live.dropped = api::SandboxDropped{.queue = d->queue_dropped,
                                         .connections = d->connections_pruned,
                                         .dns = d->dns_pruned,
                                         .events = d->events_pruned};
    }
  }
  if (ctx_->grants != nullptr) {
    if (absl::StatusOr<store::SandboxGrants> grants = ctx_->grants->Of(id); grants.ok()) {
      for (const store::SandboxSecretRow& row : grants->secrets) {
        live.secrets[row.name] = row.env;
      }
      live.git_push = grants->git_push;
      live.models = grants->models;
    }
  }
  return live;
}

absl::StatusOr<SandboxView> SandboxService::Get(absl::string_view ref) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  return SandboxView{record, LiveOf(record)};
}

absl::StatusOr<std::vector<SandboxView>> SandboxService::List(const store::SandboxFilter& filter) {
  ABOX_ASSIGN_OR_RETURN(std::vector<store::SandboxRecord> records, ctx_->sandboxes->List(filter));
  std::vector<SandboxView> views;
  views.reserve(records.size());
  for (store::SandboxRecord& r : records) {
    api::SandboxLive live = LiveOf(r);
    views.push_back({std::move(r), live});
  }
  return views;
}

absl::Status SandboxService::TearDown(const std::shared_ptr<LiveSandbox>& live,
                                      const std::string& reason, bool detach) {
  absl::Status status = live->TearDown(reason, detach);
  if (ctx_->egress != nullptr) {
    // After the agent failed: the tunnels are already broken, the threads end quickly.
    ctx_->egress->Stop(live->id());
  }
  ctx_->registry->Remove(live->id());
  if (!detach) {
    ctx_->ledger->Release(live->id());
  }
  return status;
}

absl::Status SandboxService::StopLive(const std::shared_ptr<LiveSandbox>& live,
                                      const std::string& reason, nlohmann::json stopped_payload) {
  const std::string& id = live->id();
  ABOX_RETURN_IF_ERROR(
      ctx_->recorder->Transition(id, SandboxState::kReady, SandboxState::kStopping));
  ctx_->recorder->Note(TearDown(live, reason, /*detach=*/false), absl::StrCat("stopping ", id));
  return ctx_->recorder->Transition(id, SandboxState::kStopping, SandboxState::kStopped,
                                    std::move(stopped_payload));
}

absl::StatusOr<SandboxView> SandboxService::Stop(absl::string_view ref) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  Decision decision = Decide(Operation::kStop, record);
  if (decision.verdict == Verdict::kAlreadyDone) {
    return SandboxView{record, {}};
  }
  if (decision.verdict == Verdict::kRefuse) {
    return decision.refusal;
  }
  if (record.state == SandboxState::kPaused) {
    return StopPaused(record, {{"reason", "stop requested"}});
  }
  std::shared_ptr<LiveSandbox> live = ctx_->registry->Find(record.id);
  if (live == nullptr || !live->BeginStop()) {
    return absl::FailedPreconditionError(
        absl::StrCat(StateText(record), " and already stopping: retry in a moment"));
  }
  ABOX_RETURN_IF_ERROR(StopLive(live, "the sandbox was stopped", {{"reason", "stop requested"}}));
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord stopped, ctx_->sandboxes->Get(record.id));
  return SandboxView{stopped, {}};
}

void SandboxService::StopExpired(const std::string& id, const std::string& reason,
                                 const std::string& expiry) {
  if (expiry == "idle" && ctx_->options.pause_when_idle && ctx_->checkpoints != nullptr) {
    absl::StatusOr<SandboxView> paused = Pause(id, reason);
    if (paused.ok() || ctx_->registry->Find(id) == nullptr) {
      return;
    }
    spdlog::warn("stopping idle sandbox {} instead of pausing it: {}", id,
                 paused.status().ToString());
  }
  std::shared_ptr<LiveSandbox> live = ctx_->registry->Find(id);
  if (live == nullptr) {
    // A TTL passes while the sandbox is paused too: it stops, and its saved state goes.
    absl::StatusOr<store::SandboxRecord> record = ctx_->sandboxes->Get(id);
    if (record.ok() && record->state == SandboxState::kPaused && expiry == "ttl") {
      spdlog::info("stopping paused sandbox {}: {}", id, reason);
      ctx_->recorder->Note(StopPaused(*record, {{"reason", reason}, {"expiry", expiry}}).status(),
                           absl::StrCat("stopping expired sandbox ", id));
    }
    return;  // else booting (checked again once ready)
  }
  if (!live->BeginStop()) {
    return;  // already stopping
  }
  spdlog::info("stopping sandbox {}: {}", id, reason);
  ctx_->recorder->Note(StopLive(live, absl::StrCat("the sandbox was stopped: ", reason),
                                {{"reason", reason}, {"expiry", expiry}}),
                       absl::StrCat("stopping expired sandbox ", id));
}

absl::Status SandboxService::Remove(absl::string_view ref, bool force) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  Decision decision = Decide(force ? Operation::kForceRemove : Operation::kRemove, record);
  if (decision.verdict == Verdict::kRefuse) {
    return decision.refusal;
  }
  SandboxState from = record.state;
  if (record.state == SandboxState::kReady) {
    ABOX_ASSIGN_OR_RETURN(SandboxView stopped, Stop(record.id));
    from = stopped.record.state;
  }
  // The VM's files went with the VM; what may be left is a kept console log, and a run dir a
  // crash left behind. Both go through the one delete helper, fenced to $ABOX_HOME.
  for (const std::filesystem::path& leftover :
       {ctx_->layout.KeptConsoleLog(record.id), std::filesystem::path(record.run_dir)}) {
    if (!leftover.empty()) {
      ctx_->recorder->Note(base::RemoveUnder(ctx_->layout.home, leftover),
                           absl::StrCat("removing ", leftover.string()));
    }
  }
  if (ctx_->workspaces != nullptr) {
    ctx_->recorder->Note(ctx_->workspaces->Forget(record.id),
                         absl::StrCat("removing the workspace state of ", record.id));
  }
  ABOX_RETURN_IF_ERROR(
      ctx_->recorder->Transition(record.id, from, SandboxState::kRemoved, {{"name", record.name}}));
  if (ctx_->checkpoints != nullptr) {
    // Its checkpoints, and those of sandboxes removed earlier that were kept while forks ran
    // on them (this may have been the last such fork).
    std::vector<std::string> ids;
    if (absl::StatusOr<std::vector<store::SandboxRecord>> all = ctx_->sandboxes->List({});
        all.ok()) {
      for (const store::SandboxRecord& r : *all) {
        ids.push_back(r.id);
      }
      ctx_->checkpoints->RemoveOrphans(ids);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SandboxService::ConsoleLog(absl::string_view ref, size_t max_bytes) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, ctx_->sandboxes->Resolve(ref));
  std::vector<std::string> paths;
  if (std::shared_ptr<LiveSandbox> live = ctx_->registry->Find(record.id)) {
    paths = live->ConsoleLogPaths();
  }
  if (paths.empty()) {
    paths = {ctx_->layout.KeptConsoleLog(record.id).string()};
  }
  std::string log;
  for (const std::string& p : paths) {
    if (auto data = base::ReadFile(p, 8 << 20); data.ok()) {
      log += *data;
    }
  }
  if (log.size() > max_bytes) {
    log.erase(0, log.size() - max_bytes);
  }
  return log;
}

int SandboxService::RunningCount() { return ctx_->registry->size(); }

std::string SandboxService::LastAccel() {
  std::lock_guard lock(mu_);
  return last_accel_;
}

void SandboxService::OnAgentFailure(const std::string& id, int generation,
                                    const absl::Status& status) {
  std::shared_ptr<LiveSandbox> live = ctx_->registry->Find(id);
  if (live == nullptr || live->generation() != generation) {
    return;  // gone, or about a VM a restore replaced
  }
  if (!live->BeginStop()) {
    return;  // a stop or a create's undo handles it
  }
  std::string report = live->FailureReport();
  std::string why = absl::StrCat("the sandbox failed: ", status.message(),
                                 report.empty() ? "" : absl::StrCat("; ", report));
  spdlog::warn("{}: {}", id, why);
  ctx_->recorder->Note(TearDown(live, why, /*detach=*/false),
                       absl::StrCat("tearing down failed sandbox ", id));
  ctx_->recorder->Note(ctx_->recorder->Transition(id, SandboxState::kReady, SandboxState::kFailed,
                                                  {{"error", why}}, why),
                       absl::StrCat("recording that sandbox ", id, " failed"));
}

}  // namespace abox::daemon
