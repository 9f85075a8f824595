#include "src/daemon/sandbox_manager.h"

#include <filesystem>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"
#include "src/api/errors.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/image/paths.h"
#include "src/proto/messages.h"

namespace abox::daemon {
namespace {

using store::SandboxState;

std::string StateText(const store::SandboxRecord& r) {
  return absl::StrCat("sandbox ", r.id, r.name.empty() ? "" : absl::StrCat(" (", r.name, ")"),
                      " is ", store::SandboxStateName(r.state));
}

// The console log of a failed sandbox, kept by runtime::Sandbox::FailureReport.
std::filesystem::path KeptConsoleLog(const std::string& id) {
  auto paths = image::ResolvePaths();
  if (!paths.ok()) {
    return {};
  }
  return paths->home / "logs" / (id + "-console.log");
}

// Parses the rule texts of request field `field` ("egress.allow"): 400 naming the bad one.
// `bare_presets`: "npm" means preset:npm (setup.allow takes preset names as they are).
absl::Status ParseRules(const std::vector<std::string>& texts, absl::string_view field,
                        bool bare_presets, std::vector<net::Rule>* out) {
  for (size_t i = 0; i < texts.size(); ++i) {
    std::string text = texts[i];
    if (bare_presets && net::FindPreset(text) != nullptr) {
      text = absl::StrCat("preset:", text);
    }
    absl::StatusOr<net::Rule> rule = net::ParseRule(text);
    if (!rule.ok()) {
      return api::FieldError(absl::StrCat(field, "[", i, "]"), rule.status().message());
    }
    out->push_back(*std::move(rule));
  }
  return absl::OkStatus();
}

}  // namespace

SandboxManager::SandboxManager(ManagerDeps deps, ManagerOptions options)
    : deps_(deps), options_(std::move(options)) {}

SandboxManager::~SandboxManager() { DetachAll(); }

std::function<void(const absl::Status&)> SandboxManager::FailureCallback(const std::string& id) {
  std::weak_ptr<bool> alive = alive_;
  return [this, alive, id](const absl::Status& status) {
    // On the agent's I/O thread: the cleanup blocks, so it moves to the timer thread.
    if (alive.expired()) {
      return;
    }
    deps_.timers->Post([this, alive, id, status] {
      if (!alive.expired()) {
        OnAgentFailure(id, status);
      }
    });
  };
}

std::shared_ptr<SandboxManager::Entry> SandboxManager::FindEntry(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : it->second;
}

api::SandboxLive SandboxManager::LiveOf(const std::string& id) {
  api::SandboxLive live;
  if (std::shared_ptr<Entry> entry = FindEntry(id)) {
    std::lock_guard lock(entry->mu);
    for (const auto& [exec_id, exec] : entry->execs) {
      live.running_execs += exec->done() ? 0 : 1;
    }
  }
  if (deps_.workspaces != nullptr) {
    live.workspace = deps_.workspaces->Describe(id);
  }
  if (deps_.egress != nullptr) {
    absl::StatusOr<net::EgressPolicy> egress = deps_.egress->Effective(id);
    if (egress.ok() && egress->mode) {
      live.egress_mode = std::string(net::ModeName(*egress->mode));
    }
  }
  return live;
}

absl::Status SandboxManager::Recover() {
  ABOX_ASSIGN_OR_RETURN(int64_t interrupted,
                        deps_.execs->MarkAllRunningAsInterrupted(
                            "aboxd stopped while the command was running; its output up to "
                            "then is kept"));
  if (interrupted > 0) {
    spdlog::info("recovery: {} exec(s) were running when aboxd stopped: marked interrupted",
                 interrupted);
  }
  store::SandboxFilter filter;
  filter.states = {SandboxState::kCreating, SandboxState::kReady, SandboxState::kStopping};
  ABOX_ASSIGN_OR_RETURN(std::vector<store::SandboxRecord> records, deps_.sandboxes->List(filter));
  for (const store::SandboxRecord& r : records) {
    if (r.state != SandboxState::kReady) {
      // A boot or a stop was cut short: finish the VM off, whatever state it is in.
      if (auto vm = deps_.vmm->Attach(r.run_dir); vm.ok()) {
        (void)(*vm)->Kill();
      }
      bool was_booting = r.state == SandboxState::kCreating;
      std::string why = was_booting ? "aboxd stopped while the sandbox was booting" : "";
      (void)deps_.sandboxes->UpdateState(
          r.id, was_booting ? SandboxState::kFailed : SandboxState::kStopped, why);
      deps_.events->Publish(r.id,
                            was_booting ? store::event_type::kFailed : store::event_type::kStopped,
                            {{"reason", was_booting ? why : "aboxd stopped while stopping it"}});
      continue;
    }
    std::function<void(std::unique_ptr<net::TunnelStream>)> on_tunnel;
    if (deps_.egress != nullptr) {
      if (absl::Status s = deps_.egress->Start(r.id); s.ok()) {
        on_tunnel = deps_.egress->TunnelHandler(r.id);
      } else {
        spdlog::warn("recovery: {}: egress is off for it: {}", r.id, s.ToString());
      }
    }
    absl::StatusOr<std::unique_ptr<runtime::Sandbox>> sandbox =
        runtime::Sandbox::Attach(*deps_.vmm, r.id, r.run_dir, options_.attach_timeout,
                                 FailureCallback(r.id), std::move(on_tunnel));
    if (!sandbox.ok()) {
      if (deps_.egress != nullptr) {
        deps_.egress->Stop(r.id);
      }
      std::string why = absl::StrCat("the sandbox died while aboxd was not running: ",
                                     sandbox.status().message());
      spdlog::warn("recovery: {}: {}", r.id, why);
      (void)deps_.sandboxes->UpdateState(r.id, SandboxState::kFailed, why);
      deps_.events->Publish(r.id, store::event_type::kFailed, {{"error", why}});
      continue;
    }
    (void)deps_.ledger->Reserve(r.id, r.cpus, r.memory_mib, /*force=*/true);
    auto entry = std::make_shared<Entry>();
    entry->id = r.id;
    entry->sandbox = *std::move(sandbox);
    {
      std::lock_guard lock(mu_);
      live_[r.id] = entry;
    }
    (void)deps_.sandboxes->Touch(r.id);
    spdlog::info("recovery: re-attached to sandbox {}", r.id);
    deps_.events->Publish(r.id, "reattached", {{"vmm_pid", r.vmm_pid}});
  }
  ScheduleReaper();
  return absl::OkStatus();
}

absl::StatusOr<SandboxView> SandboxManager::Create(
    const api::SandboxCreate& request, const std::function<void(const SandboxView&)>& accepted) {
  ABOX_ASSIGN_OR_RETURN(vmm::Accel accel, vmm::ParseAccel(request.accel));
  // Open (and check) the image before reserving anything: a missing or stale one fails here
  // with how to build it. The boot then uses these files instead of opening them again.
  std::optional<image::ImageFiles> files = options_.image_files;
  if (!files) {
    ABOX_ASSIGN_OR_RETURN(image::Paths paths, image::ResolvePaths());
    ABOX_ASSIGN_OR_RETURN(files,
                          image::OpenImageForBoot(paths, request.image, proto::kProtocolVersion));
  }
  std::optional<workspace::Binding> binding;
  if (request.workspace) {
    if (deps_.workspaces == nullptr) {
      return absl::UnimplementedError("this aboxd has no workspace support");
    }
    workspace::Binding b;
    b.host_root = request.workspace->path;
    b.guest_path = request.workspace->guest_path;
    b.exclude_add = request.workspace->exclude;
    b.exclude_remove = request.workspace->include;
    b.git_history = request.workspace->git_history;
    ABOX_ASSIGN_OR_RETURN(binding, workspace::ValidateBinding(std::move(b)));
  }
  // Egress rules are checked before anything is reserved: a typo is a 400 naming the rule.
  std::optional<net::EgressPolicy> egress_policy;
  std::vector<net::Rule> setup_rules;
  if ((request.egress || request.setup) && deps_.egress == nullptr) {
    return absl::UnimplementedError("this aboxd has no egress support");
  }
  if (request.egress) {
    net::EgressPolicy policy;
    if (request.egress->mode) {
      ABOX_ASSIGN_OR_RETURN(policy.mode, net::ParseMode(*request.egress->mode));
    }
    ABOX_RETURN_IF_ERROR(ParseRules(request.egress->allow, "egress.allow", false, &policy.allow));
    egress_policy = std::move(policy);
  }
  if (request.setup) {
    ABOX_RETURN_IF_ERROR(ParseRules(request.setup->allow, "setup.allow", true, &setup_rules));
  }
  std::string id = runtime::NewSandboxId();
  ABOX_ASSIGN_OR_RETURN(std::string run_dir, runtime::SandboxRunDir(id));
  ABOX_RETURN_IF_ERROR(deps_.ledger->Reserve(id, static_cast<int>(request.cpus),
                                             static_cast<int>(request.memory_mib)));
  store::SandboxRecord record;
  record.id = id;
  record.name = request.name;
  record.image = request.image;
  record.cpus = static_cast<int>(request.cpus);
  record.memory_mib = static_cast<int>(request.memory_mib);
  record.labels = request.labels;
  record.state = SandboxState::kCreating;
  record.run_dir = run_dir;
  record.ttl_seconds = request.ttl_seconds;
  record.idle_timeout_seconds = request.idle_timeout_seconds;
  absl::StatusOr<store::SandboxRecord> stored = deps_.sandboxes->Insert(record);
  if (!stored.ok()) {
    deps_.ledger->Release(id);
    return stored.status();
  }
  if (binding) {
    if (absl::Status s = deps_.workspaces->Bind(id, *binding); !s.ok()) {
      deps_.ledger->Release(id);
      (void)deps_.sandboxes->Delete(id);
      return s;
    }
  }
  if (egress_policy) {
    if (absl::Status s = deps_.egress->SetPolicy(EgressScope{id}, *egress_policy); !s.ok()) {
      deps_.ledger->Release(id);
      if (binding) {
        (void)deps_.workspaces->Forget(id);
      }
      (void)deps_.sandboxes->Delete(id);
      return s;
    }
  }
  auto entry = std::make_shared<Entry>();
  entry->id = id;
  {
    std::lock_guard lock(mu_);
    live_[id] = entry;
  }
  deps_.events->Publish(id, store::event_type::kCreated,
                        {{"name", record.name},
                         {"image", record.image},
                         {"cpus", record.cpus},
                         {"memory_mib", record.memory_mib}});
  if (accepted) {
    accepted(SandboxView{*stored, {}});
  }

  runtime::SandboxConfig config;
  config.id = id;
  config.image = request.image;
  config.cpus = record.cpus;
  config.memory_mib = record.memory_mib;
  config.accel = accel;
  config.tie_to_caller = false;
  config.boot_timeout = options_.boot_timeout;
  config.files = std::move(files);
  config.on_failure = FailureCallback(id);
  absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<runtime::Sandbox>> sandbox =
      absl::InternalError("egress did not start");
  absl::Status egress_started = absl::OkStatus();
  if (deps_.egress != nullptr) {
    // The proxy exists before the agent connects: the guest's first tunnel finds it.
    egress_started = deps_.egress->Start(id);
    config.on_tunnel = deps_.egress->TunnelHandler(id);
  }
  if (egress_started.ok()) {
    sandbox = runtime::Sandbox::Boot(
        *deps_.vmm, config, [&](const std::string& note) { spdlog::warn("{}: {}", id, note); });
  } else {
    sandbox = absl::Status(egress_started.code(),
                           absl::StrCat("egress could not start: ", egress_started.message()));
  }
  std::string failed_how = "failed to boot";
  if (sandbox.ok() && binding) {
    // The first sync is part of creating: a sandbox whose workspace cannot go in is not ready.
    if (absl::Status s = SyncWorkspace(id, **sandbox); !s.ok()) {
      (void)(*sandbox)->Destroy();
      sandbox = absl::Status(s.code(),
                             absl::StrCat("the workspace could not be synced in: ", s.message()));
    }
  }
  if (sandbox.ok() && request.setup) {
    // After the workspace sync, so that e.g. `npm ci` finds package-lock.json.
    if (absl::Status s = RunSetup(id, **sandbox, *request.setup, std::move(setup_rules)); !s.ok()) {
      (void)(*sandbox)->Destroy();
      sandbox = s;
      failed_how = "failed during setup";
    }
  }
  if (!sandbox.ok()) {
    std::string why = std::string(sandbox.status().message());
    if (deps_.egress != nullptr) {
      deps_.egress->Stop(id);
    }
    {
      std::lock_guard lock(mu_);
      live_.erase(id);
    }
    deps_.ledger->Release(id);
    (void)deps_.sandboxes->UpdateState(id, SandboxState::kFailed, why);
    deps_.events->Publish(id, store::event_type::kFailed, {{"error", why}});
    return absl::Status(sandbox.status().code(),
                        absl::StrCat("sandbox ", id, " ", failed_how, ": ", why));
  }
  vmm::Vm& vm = (*sandbox)->vm();
  std::string accel_name = vmm::AccelName(vm.accel());
  (void)deps_.sandboxes->SetVm(id, vm.pid(), accel_name);
  (void)deps_.sandboxes->UpdateState(id, SandboxState::kReady);
  {
    std::lock_guard lock(entry->mu);
    entry->sandbox = *std::move(sandbox);
  }
  {
    std::lock_guard lock(mu_);
    last_accel_ = accel_name;
  }
  nlohmann::json payload = {{"accel", accel_name},
                            {"boot_ms", absl::ToInt64Milliseconds(absl::Now() - start)}};
  if (!vm.accel_note().empty()) {
    payload["accel_note"] = vm.accel_note();
  }
  deps_.events->Publish(id, store::event_type::kReady, payload);
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord ready, deps_.sandboxes->Get(id));
  return SandboxView{ready, {}};
}

absl::Status SandboxManager::SyncWorkspace(const std::string& id, runtime::Sandbox& sandbox) {
  if (deps_.workspaces == nullptr || !deps_.workspaces->Has(id)) {
    return absl::OkStatus();
  }
  runtime::AgentGuestTools tools(sandbox.agent(), options_.guest_tool_path,
                                 options_.guest_tool_deadline, id);
  std::unique_ptr<workspace::GuestTools> wrapped =
      options_.wrap_guest_tools ? options_.wrap_guest_tools(tools) : nullptr;
  return deps_.workspaces->Sync(id, wrapped ? *wrapped : tools).status();
}

absl::Status SandboxManager::WithGuestTools(
    absl::string_view ref,
    const std::function<absl::Status(const store::SandboxRecord&, workspace::GuestTools&)>& fn) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, deps_.sandboxes->Resolve(ref));
  if (guest_operations_.fetch_add(1) >= options_.max_guest_operations) {
    guest_operations_.fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "aboxd already runs ", options_.max_guest_operations,
        " workspace operations, the most it runs at once (so that stop, rm and exec always find "
        "a worker): retry in a moment (each guest tool ends within its deadline)"));
  }
  absl::Cleanup counted = [&] { guest_operations_.fetch_sub(1); };
  std::shared_ptr<Entry> entry = FindEntry(record.id);
  runtime::Sandbox* sandbox = nullptr;
  bool busy = false;
  if (entry != nullptr) {
    std::lock_guard lock(entry->mu);
    busy = entry->guest_tool_users >= options_.max_guest_operations_per_sandbox;
    if (!entry->stopping && entry->sandbox != nullptr && !busy) {
      sandbox = entry->sandbox.get();
      ++entry->guest_tool_users;
    }
  }
  if (busy) {
    return absl::AbortedError(absl::StrCat(
        "sandbox ", record.id, " already has ", options_.max_guest_operations_per_sandbox,
        " workspace operations in flight (sync, diff, apply, pull or an exec's sync): retry when "
        "they finish (each guest tool ends within its deadline), or stop the sandbox"));
  }
  if (sandbox == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(StateText(record), ": the workspace is read through a running sandbox"));
  }
  absl::Cleanup done = [&] {
    std::lock_guard lock(entry->mu);
    --entry->guest_tool_users;
    entry->tools_idle.notify_all();
  };
  runtime::AgentGuestTools tools(sandbox->agent(), options_.guest_tool_path,
                                 options_.guest_tool_deadline, record.id);
  std::unique_ptr<workspace::GuestTools> wrapped =
      options_.wrap_guest_tools ? options_.wrap_guest_tools(tools) : nullptr;
  return fn(record, wrapped ? *wrapped : tools);
}

absl::StatusOr<SandboxView> SandboxManager::Get(absl::string_view ref) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, deps_.sandboxes->Resolve(ref));
  return SandboxView{record, LiveOf(record.id)};
}

absl::StatusOr<std::vector<SandboxView>> SandboxManager::List(const store::SandboxFilter& filter) {
  ABOX_ASSIGN_OR_RETURN(std::vector<store::SandboxRecord> records, deps_.sandboxes->List(filter));
  std::vector<SandboxView> views;
  views.reserve(records.size());
  for (store::SandboxRecord& r : records) {
    api::SandboxLive live = LiveOf(r.id);
    views.push_back({std::move(r), live});
  }
  return views;
}

absl::Status SandboxManager::TearDown(const std::shared_ptr<Entry>& entry,
                                      const std::string& reason, bool detach) {
  std::map<std::string, std::shared_ptr<LiveExec>> execs;
  runtime::Sandbox* sandbox = nullptr;
  {
    std::lock_guard lock(entry->mu);
    entry->stopping = true;
    execs.swap(entry->execs);
    sandbox = entry->sandbox.get();
  }
  for (auto& [id, exec] : execs) {
    exec->SetInterruptReason(reason);
  }
  if (sandbox != nullptr) {
    // Ends every command: their streams reset and the pumps record them as interrupted.
    sandbox->agent().Fail(absl::CancelledError(reason));
  }
  for (auto& [id, exec] : execs) {
    exec->Join();
  }
  {
    // Workspace operations using the agent end quickly once it failed; wait for them.
    std::unique_lock lock(entry->mu);
    entry->tools_idle.wait(lock, [&] { return entry->guest_tool_users == 0; });
  }
  absl::Status status;
  if (sandbox != nullptr) {
    status = detach ? sandbox->Detach() : sandbox->Destroy();
  }
  if (deps_.egress != nullptr) {
    // After the agent failed: the tunnels are already broken, the threads end quickly.
    deps_.egress->Stop(entry->id);
  }
  {
    std::lock_guard lock(entry->mu);
    entry->sandbox.reset();
  }
  {
    std::lock_guard lock(mu_);
    live_.erase(entry->id);
  }
  if (!detach) {
    deps_.ledger->Release(entry->id);
  }
  return status;
}

absl::StatusOr<SandboxView> SandboxManager::Stop(absl::string_view ref) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, deps_.sandboxes->Resolve(ref));
  if (record.state == SandboxState::kStopped || record.state == SandboxState::kFailed) {
    return SandboxView{record, {}};
  }
  std::shared_ptr<Entry> entry = FindEntry(record.id);
  if (entry == nullptr || record.state == SandboxState::kCreating) {
    return absl::FailedPreconditionError(
        absl::StrCat(StateText(record), ": wait until it is ready (or failed), then retry"));
  }
  {
    std::lock_guard lock(entry->mu);
    if (entry->stopping || entry->sandbox == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(StateText(record), " and already stopping: retry in a moment"));
    }
    entry->stopping = true;
  }
  (void)deps_.sandboxes->UpdateState(record.id, SandboxState::kStopping);
  std::string reason = "the sandbox was stopped";
  absl::Status torn = TearDown(entry, reason, /*detach=*/false);
  if (!torn.ok()) {
    spdlog::warn("stopping {}: {}", record.id, torn.ToString());
  }
  (void)deps_.sandboxes->UpdateState(record.id, SandboxState::kStopped);
  deps_.events->Publish(record.id, store::event_type::kStopped, {{"reason", "stop requested"}});
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord stopped, deps_.sandboxes->Get(record.id));
  return SandboxView{stopped, {}};
}

absl::Status SandboxManager::Remove(absl::string_view ref, bool force) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, deps_.sandboxes->Resolve(ref));
  switch (record.state) {
    case SandboxState::kCreating:
    case SandboxState::kStopping:
      return absl::FailedPreconditionError(absl::StrCat(
          StateText(record), ": retry once it is ready or stopped (watch with abox events)"));
    case SandboxState::kReady:
      if (!force) {
        return absl::FailedPreconditionError(
            absl::StrCat(StateText(record), " (running): stop it first (abox stop ", record.id,
                         ") or remove it anyway with force (abox rm -f ", record.id, ")"));
      }
      ABOX_RETURN_IF_ERROR(Stop(record.id).status());
      break;
    default:
      break;
  }
  // The VM's files went with the VM; what may be left is a kept console log, and a run dir a
  // crash left behind. Both go through the one delete helper, fenced to $ABOX_HOME.
  if (auto paths = image::ResolvePaths(); paths.ok()) {
    for (const std::filesystem::path& leftover :
         {KeptConsoleLog(record.id), std::filesystem::path(record.run_dir)}) {
      if (!leftover.empty()) {
        if (absl::Status s = base::RemoveUnder(paths->home, leftover); !s.ok()) {
          spdlog::warn("removing {}: {}", leftover.string(), s.ToString());
        }
      }
    }
  }
  if (deps_.workspaces != nullptr) {
    if (absl::Status s = deps_.workspaces->Forget(record.id); !s.ok()) {
      spdlog::warn("removing the workspace state of {}: {}", record.id, s.ToString());
    }
  }
  ABOX_RETURN_IF_ERROR(deps_.sandboxes->Delete(record.id));
  deps_.events->Publish(record.id, store::event_type::kRemoved, {{"name", record.name}});
  return absl::OkStatus();
}

absl::StatusOr<std::string> SandboxManager::ConsoleLog(absl::string_view ref, size_t max_bytes) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, deps_.sandboxes->Resolve(ref));
  std::vector<std::string> paths;
  if (std::shared_ptr<Entry> entry = FindEntry(record.id)) {
    std::lock_guard lock(entry->mu);
    if (entry->sandbox != nullptr) {
      std::string current = entry->sandbox->vm().console_log_path();
      paths = {current + ".1", current};
    }
  }
  if (paths.empty()) {
    paths = {KeptConsoleLog(record.id).string()};
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

absl::StatusOr<std::shared_ptr<LiveExec>> SandboxManager::StartExec(
    absl::string_view ref, const api::ExecCreate& request) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, deps_.sandboxes->Resolve(ref));
  std::shared_ptr<Entry> entry = FindEntry(record.id);
  if (entry == nullptr || record.state != SandboxState::kReady) {
    return absl::FailedPreconditionError(
        absl::StrCat(StateText(record), ": only ready sandboxes run commands",
                     record.state == SandboxState::kCreating ? " (wait for it to boot)"
                                                             : " (create a new one)"));
  }
  if (request.sync && deps_.workspaces != nullptr && deps_.workspaces->Has(record.id)) {
    absl::Status synced =
        WithGuestTools(record.id, [&](const store::SandboxRecord&, workspace::GuestTools& tools) {
          return deps_.workspaces->Sync(record.id, tools).status();
        });
    if (!synced.ok()) {
      return absl::Status(synced.code(),
                          absl::StrCat(synced.message(),
                                       " (the command did not run; run it without the sync "
                                       "with --no-sync)"));
    }
  }
  std::weak_ptr<bool> alive = alive_;
  std::weak_ptr<Entry> weak_entry = entry;
  std::string sandbox_id = record.id;
  auto on_done = [this, alive, weak_entry, sandbox_id](const store::ExecRecord& done) {
    if (alive.expired()) {
      return;
    }
    (void)deps_.sandboxes->Touch(sandbox_id);
    std::string exec_id = done.id;
    deps_.timers->Post([alive, weak_entry, exec_id] {
      std::shared_ptr<Entry> e = weak_entry.lock();
      if (alive.expired() || e == nullptr) {
        return;
      }
      std::shared_ptr<LiveExec> finished;
      {
        std::lock_guard l(e->mu);
        auto it = e->execs.find(exec_id);
        if (it != e->execs.end()) {
          finished = std::move(it->second);
          e->execs.erase(it);
        }
      }
      if (finished) {
        finished->Join();
      }
    });
  };
  std::lock_guard lock(entry->mu);  // no exec may slip in after a teardown took the list
  if (entry->stopping || entry->sandbox == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("sandbox ", record.id, " is stopping: it runs no more commands"));
  }
  ABOX_ASSIGN_OR_RETURN(std::shared_ptr<LiveExec> live,
                        LaunchExec(record.id, entry->sandbox->agent(), request, on_done));
  entry->execs[live->id()] = live;  // busy now: the reaper keeps it from idling out
  return live;
}

absl::StatusOr<ExecHandle> SandboxManager::FindExec(absl::string_view ref,
                                                    absl::string_view exec_id) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, deps_.sandboxes->Resolve(ref));
  absl::StatusOr<store::ExecRecord> exec = deps_.execs->Get(exec_id);
  if (!exec.ok() || exec->sandbox_id != record.id) {
    return absl::NotFoundError(absl::StrCat("no exec \"", exec_id, "\" in sandbox ", record.id,
                                            ": list them with GET /v1/sandboxes/", record.id,
                                            "/execs (abox logs ", record.id, ")"));
  }
  ExecHandle handle{*std::move(exec), nullptr};
  if (std::shared_ptr<Entry> entry = FindEntry(record.id)) {
    std::lock_guard lock(entry->mu);
    auto it = entry->execs.find(std::string(exec_id));
    if (it != entry->execs.end()) {
      handle.live = it->second;
    }
  }
  return handle;
}

absl::StatusOr<store::ExecWithOutput> SandboxManager::ExecOutput(absl::string_view exec_id) {
  return deps_.execs->GetWithOutput(exec_id);
}

absl::StatusOr<std::vector<store::ExecRecord>> SandboxManager::ListExecs(absl::string_view ref,
                                                                         int limit) {
  ABOX_ASSIGN_OR_RETURN(store::SandboxRecord record, deps_.sandboxes->Resolve(ref));
  return deps_.execs->ListBySandbox(record.id, limit);
}

int SandboxManager::RunningCount() {
  std::lock_guard lock(mu_);
  return static_cast<int>(live_.size());
}

std::string SandboxManager::LastAccel() {
  std::lock_guard lock(mu_);
  return last_accel_;
}

void SandboxManager::OnAgentFailure(const std::string& id, const absl::Status& status) {
  std::shared_ptr<Entry> entry = FindEntry(id);
  if (entry == nullptr) {
    return;
  }
  std::string report;
  {
    std::lock_guard lock(entry->mu);
    if (entry->stopping || entry->sandbox == nullptr) {
      return;  // a stop or a boot failure handles it
    }
    entry->stopping = true;
    report = entry->sandbox->FailureReport();
  }
  std::string why = absl::StrCat("the sandbox failed: ", status.message(),
                                 report.empty() ? "" : absl::StrCat("; ", report));
  spdlog::warn("{}: {}", id, why);
  (void)TearDown(entry, why, /*detach=*/false);
  (void)deps_.sandboxes->UpdateState(id, SandboxState::kFailed, why);
  deps_.events->Publish(id, store::event_type::kFailed, {{"error", why}});
}

void SandboxManager::ScheduleReaper() {
  std::weak_ptr<bool> alive = alive_;
  deps_.timers->RunAfter(options_.reap_interval, [this, alive] {
    if (alive.expired()) {
      return;
    }
    ReapExpired();
    ScheduleReaper();
  });
}

void SandboxManager::ReapExpired() {
  // A sandbox with a command running is not idle: keep its last_active_at fresh.
  std::vector<std::string> busy;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, entry] : live_) {
      std::lock_guard l(entry->mu);
      for (const auto& [exec_id, exec] : entry->execs) {
        if (!exec->done()) {
          busy.push_back(id);
          break;
        }
      }
    }
  }
  for (const std::string& id : busy) {
    (void)deps_.sandboxes->Touch(id);
  }
  absl::StatusOr<std::vector<store::ExpiredSandbox>> expired =
      deps_.sandboxes->Expired(absl::Now());
  if (!expired.ok()) {
    spdlog::warn("reaper: {}", expired.status().ToString());
    return;
  }
  for (const store::ExpiredSandbox& e : *expired) {
    if (e.sandbox.state != SandboxState::kReady) {
      continue;  // still booting: checked again once ready
    }
    std::shared_ptr<Entry> entry = FindEntry(e.sandbox.id);
    if (entry == nullptr) {
      continue;
    }
    {
      std::lock_guard lock(entry->mu);
      if (entry->stopping || entry->sandbox == nullptr) {
        continue;
      }
      entry->stopping = true;
    }
    std::string reason =
        e.reason == store::ExpiryReason::kTtl
            ? absl::StrCat("its TTL of ", e.sandbox.ttl_seconds, "s passed")
            : absl::StrCat("it was idle for ", e.sandbox.idle_timeout_seconds, "s");
    spdlog::info("stopping sandbox {}: {}", e.sandbox.id, reason);
    (void)deps_.sandboxes->UpdateState(e.sandbox.id, SandboxState::kStopping);
    (void)TearDown(entry, absl::StrCat("the sandbox was stopped: ", reason), /*detach=*/false);
    (void)deps_.sandboxes->UpdateState(e.sandbox.id, SandboxState::kStopped);
    deps_.events->Publish(
        e.sandbox.id, store::event_type::kStopped,
        {{"reason", reason}, {"expiry", e.reason == store::ExpiryReason::kTtl ? "ttl" : "idle"}});
  }
}

void SandboxManager::DetachAll() {
  std::map<std::string, std::shared_ptr<Entry>> entries;
  {
    std::lock_guard lock(mu_);
    if (detached_) {
      return;
    }
    detached_ = true;
    entries = live_;
  }
  alive_.reset();  // posted callbacks and the reaper become no-ops
  for (auto& [id, entry] : entries) {
    absl::Status s = TearDown(entry, "aboxd stopped while the command was running", true);
    if (!s.ok()) {
      spdlog::warn("leaving sandbox {} running: {}", id, s.ToString());
    }
  }
}

}  // namespace abox::daemon
