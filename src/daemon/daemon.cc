#include "src/daemon/daemon.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"
#include "src/http/listen_socket.h"
#include "src/proto/frame.h"
#include "src/runtime/guest_identity.h"
#include "src/runtime/sandbox.h"
#include "src/secrets/file_store.h"
#include "src/store/migrations.h"
#include "src/workspace/run_copies.h"

namespace abox::daemon {

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Create(DaemonConfig config, DaemonDeps deps) {
  if (config.server.unix_socket_path.empty()) {
    return absl::InvalidArgumentError("aboxd needs a unix socket path");
  }
  // First of all, the socket's lock: it says that this is the only aboxd of this socket, which
  // recovery relies on. Of several aboxds started at once, the losers leave here
  // (kAlreadyExists) before they touch $ABOX_HOME or the state database, which the winner is
  // creating and migrating; the launcher then waits for the winner, which holds the lock.
  ABOX_ASSIGN_OR_RETURN(http::UnixSocketLock instance,
                        http::LockUnixSocket(config.server.unix_socket_path));
  std::unique_ptr<Daemon> d(new Daemon());
  d->config_ = std::move(config);
  const base::HostLayout& layout = d->config_.layout;
  std::error_code ec;
  std::filesystem::create_directories(layout.home, ec);
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create $ABOX_HOME ",
                                                      layout.home.string(), ": ", ec.message(),
                                                      "; set ABOX_HOME to a writable directory"));
  }
  ::chmod(layout.home.c_str(), 0700);
  d->clock_ = deps.clock != nullptr ? deps.clock : &base::SystemClock();
  base::Clock* clock = d->clock_;
  store::Clock store_clock = [clock] { return clock->Now(); };

  absl::StatusOr<std::unique_ptr<store::Database>> db =
      store::OpenStateDatabase(layout.StateDatabase().string());
  if (!db.ok()) {
    return absl::Status(db.status().code(),
                        absl::StrCat("cannot open the state database: ", db.status().message()));
  }
  d->db_ = *std::move(db);
  d->sandbox_repo_ = std::make_unique<store::SandboxRepo>(*d->db_, store_clock);
  d->exec_repo_ = std::make_unique<store::ExecRepo>(*d->db_);
  d->event_repo_ = std::make_unique<store::EventRepo>(*d->db_);
  d->egress_repo_ = std::make_unique<store::EgressRepo>(*d->db_);
  d->secret_repo_ = std::make_unique<store::SecretRepo>(*d->db_, store_clock);
  SecretService::ValueStoreOpener secret_values = std::move(deps.secret_values);
  if (!secret_values) {
    secret_values = [home = layout.home]() -> absl::StatusOr<secrets::DefaultValueStore> {
      const char* choice = std::getenv("ABOX_SECRET_STORE");  // NOLINT(concurrency-mt-unsafe)
      if (choice != nullptr && std::string(choice) == "file") {
        ABOX_ASSIGN_OR_RETURN(std::unique_ptr<secrets::FileValueStore> file,
                              secrets::FileValueStore::Open(home / "secrets"));
        return secrets::DefaultValueStore{.store = std::move(file)};
      }
      return secrets::OpenDefaultValueStore(home / "secrets");
    };
  }
  d->secrets_ = std::make_unique<SecretService>(*d->secret_repo_, std::move(secret_values));
  d->grant_repo_ = std::make_unique<store::GrantRepo>(*d->db_);
  d->grants_ = std::make_unique<SecretGrants>(*d->secrets_, *d->grant_repo_, layout,
                                              d->config_.upstream_ca_files);
  d->events_ = std::make_unique<EventBus>(*d->event_repo_);
  d->ledger_ = std::make_unique<Ledger>(d->config_.budget);
  d->timers_ = std::make_unique<TimerQueue>();
  if (deps.vmm != nullptr) {
    d->vmm_ = std::move(deps.vmm);
  } else {
    absl::StatusOr<std::unique_ptr<vmm::Vmm>> qemu = runtime::CreateDefaultVmm(layout);
    if (!qemu.ok()) {
      return absl::Status(qemu.status().code(),
                          absl::StrCat("cannot set up QEMU: ", qemu.status().message()));
    }
    d->vmm_ = *std::move(qemu);
  }
  absl::StatusOr<std::unique_ptr<EgressService>> egress =
      EgressService::Create(*d->egress_repo_, *d->events_, d->config_.egress);
  if (!egress.ok()) {
    return absl::Status(egress.status().code(),
                        absl::StrCat("cannot set up egress: ", egress.status().message()));
  }
  d->egress_ = *std::move(egress);
  d->model_repo_ = std::make_unique<store::ModelRepo>(*d->db_, store_clock);
  d->models_ = std::make_unique<ModelService>(
      *d->model_repo_, *d->secrets_, *d->grants_, *d->events_, d->egress_->resolver(),
      d->config_.upstream_ca_files, d->config_.model_requests_per_minute);
  ModelService* models = d->models_.get();
  d->grants_->set_models_check(
      [models](const std::string& api) { return models->CheckUsable(api); });
  d->egress_->set_model_broker([models](const std::string& id, net::TunnelStream& stream,
                                        int cancel_fd) { models->Serve(id, stream, cancel_fd); });
  absl::StatusOr<std::unique_ptr<WorkspaceService>> workspaces =
      WorkspaceService::Create(layout.home.string(), d->config_.workspace_budget);
  if (!workspaces.ok()) {
    return absl::Status(workspaces.status().code(),
                        absl::StrCat("cannot set up workspaces: ", workspaces.status().message()));
  }
  d->workspaces_ = *std::move(workspaces);

  if (d->config_.sandbox.golden_snapshots && d->vmm_->CanSaveState()) {
    d->templates_ = std::make_unique<GoldenTemplates>(*d->vmm_, layout);
  }
  if (d->vmm_->CanSaveState()) {
    d->checkpoints_ = std::make_unique<CheckpointStore>(*d->vmm_, layout,
                                                        d->config_.sandbox.checkpoint_budget_bytes);
  }
  if (d->config_.pool.size > 0) {
    d->pool_ = std::make_unique<WarmPool>(d->config_.pool, *d->ledger_, layout, d->MakePoolDeps());
  }
  d->recorder_ = std::make_unique<StateRecorder>(*d->sandbox_repo_, *d->events_);
  d->registry_ = std::make_unique<Registry>();
  d->context_ = std::make_unique<SandboxContext>(SandboxContext{
      .options = d->config_.sandbox,
      .layout = layout,
      .clock = clock,
      .vmm = d->vmm_.get(),
      .sandboxes = d->sandbox_repo_.get(),
      .execs = d->exec_repo_.get(),
      .recorder = d->recorder_.get(),
      .registry = d->registry_.get(),
      .events = d->events_.get(),
      .ledger = d->ledger_.get(),
      .timers = d->timers_.get(),
      .workspaces = d->workspaces_.get(),
      .templates = d->templates_.get(),
      .pool = d->pool_.get(),
      .checkpoints = d->checkpoints_.get(),
      .egress = d->egress_.get(),
      .grants = d->grants_.get(),
  });
  SecretGrants* grants = d->grants_.get();
  d->egress_->set_intercept_provider(
      [grants](const std::string& id) { return grants->InterceptFor(id); });
  d->workspaces_->set_sync_check([grants](const std::string& id) { return grants->SyncCheck(id); });
  d->gate_ = std::make_unique<GuestToolsGate>(*d->context_);
  d->exec_service_ = std::make_unique<ExecService>(*d->context_, *d->gate_);
  d->exec_service_->set_alive(d->alive_);
  d->setup_runner_ = std::make_unique<SetupRunner>(*d->context_, *d->exec_service_);
  d->sandbox_service_ =
      std::make_unique<SandboxService>(*d->context_, *d->gate_, *d->setup_runner_);
  SandboxService* sandboxes = d->sandbox_service_.get();
  d->exec_service_->set_resumer(
      [sandboxes](const std::string& id) { return sandboxes->Resume(id).status(); });
  d->reaper_ = std::make_unique<Reaper>(
      *d->context_,
      [sandboxes](const std::string& id, const std::string& reason, const std::string& expiry) {
        sandboxes->StopExpired(id, reason, expiry);
      });

  Services& s = d->services_;
  s.sandboxes = sandboxes;
  s.execs = d->exec_service_.get();
  s.guest_tools = d->gate_.get();
  s.recorder = d->recorder_.get();
  s.events = d->events_.get();
  s.ledger = d->ledger_.get();
  s.timers = d->timers_.get();
  s.workspaces = d->workspaces_.get();
  s.egress = d->egress_.get();
  s.pool = d->pool_.get();
  s.secrets = d->secrets_.get();
  s.grants = d->grants_.get();
  s.models = d->models_.get();
  s.clock = clock;
  s.started = clock->Now();
  s.openapi_yaml = d->config_.openapi_yaml;
  http::Router router;
  if (absl::Status r = RegisterRoutes(router, s); !r.ok()) {
    return absl::InternalError(absl::StrCat("internal: ", r.message()));
  }
  d->routes_ = router.Routes();
  // Clients that connect now wait in the backlog until Start(). The server keeps the lock.
  ABOX_ASSIGN_OR_RETURN(
      d->server_, http::Server::Create(d->config_.server, std::move(router), std::move(instance)));
  return d;
}

absl::Status Daemon::Start() {
  // What `abox run -w` runs that were killed left (a copy of a workspace each): no run can
  // be using them, since their locks are free.
  if (absl::StatusOr<int> removed = workspace::CollectRunLeftovers(config_.layout.home);
      !removed.ok()) {
    recorder_->Note(removed.status(), "removing the workspace copies of killed abox runs");
  } else if (*removed > 0) {
    spdlog::info("removed {} workspace copies that killed abox runs left", *removed);
  }
  if (absl::Status s = workspaces_->Recover(); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("cannot recover interrupted applies: ", s.message()));
  }
  if (absl::Status s = sandbox_service_->Recover(); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("cannot recover the sandboxes of the previous run: ", s.message()));
  }
  if (checkpoints_ != nullptr) {
    checkpoints_->RemoveIncomplete();
  }
  if (templates_ != nullptr) {
    // Golden templates of the previous aboxd (their memory went with it) that no recovered
    // sandbox's disk still stands on.
    if (int removed = templates_->RemoveUnused(); removed > 0) {
      spdlog::info("removed {} golden templates of the previous aboxd", removed);
    }
  }
  // VMs a killed aboxd left in the pool: those no create had taken yet go.
  if (int removed = WarmPool::CollectLeftovers(
          config_.layout, *vmm_,
          [this](const std::string& id) { return sandbox_repo_->Get(id).ok(); });
      removed > 0) {
    spdlog::info("removed {} warm-pool VMs of the previous aboxd", removed);
  }
  ABOX_RETURN_IF_ERROR(server_->Start());
  reaper_->Start();
  if (pool_ != nullptr) {
    pool_->Start(config_.pool_shapes);
  }
  return absl::OkStatus();
}

PoolDeps Daemon::MakePoolDeps() {
  PoolDeps deps;
  deps.start = [this](const std::string& id, const PoolShape& shape,
                      const image::ImageFiles& files) -> absl::StatusOr<BootedVm> {
    BootRequest boot;
    boot.vm_id = id;
    boot.files = files;
    boot.cpus = shape.cpus;
    boot.memory_mib = shape.memory_mib;
    boot.disk_mib = shape.disk_mib;
    boot.accel = shape.accel;
    boot.boot_timeout = config_.sandbox.boot_timeout;
    boot.templates = templates_.get();  // null: pooled VMs boot
    ABOX_ASSIGN_OR_RETURN(BootedVm booted, BootVm(*vmm_, config_.layout, boot));
    if (config_.sandbox.guest_identity) {
      // Its identity now already (its id is the sandbox's): clones of one template differ from
      // the start, and the identity tool's first run in a fresh clone (page faults into the
      // template's memory) is paid here, not by the create, which applies it again (RNG bytes
      // and clock of the hand-out).
      ABOX_ASSIGN_OR_RETURN(runtime::GuestIdentity identity, runtime::NewGuestIdentity(id));
      absl::Status applied = runtime::ApplyGuestIdentity(booted.vm->agent(), identity,
                                                         config_.sandbox.guest_tool_path);
      if (!applied.ok()) {
        (void)booted.vm->Destroy();
        return absl::Status(applied.code(), absl::StrCat("the pooled guest did not take an "
                                                         "identity: ",
                                                         applied.message()));
      }
    }
    return booted;
  };
  deps.destroy = [this](const std::string& id, std::unique_ptr<runtime::Sandbox> vm) {
    if (vm != nullptr) {
      recorder_->Note(vm->Destroy(), absl::StrCat("destroying pooled VM ", id));
    }
  };
  deps.open_image = [this](const std::string& name) -> absl::StatusOr<image::ImageFiles> {
    if (config_.sandbox.image_files) {
      return *config_.sandbox.image_files;
    }
    return image::OpenImageForBoot(config_.layout, name, proto::kProtocolVersion);
  };
  deps.available_mib = [] { return AvailableMemoryMib(); };
  deps.new_id = [] { return runtime::NewSandboxId(); };
  return deps;
}

void Daemon::Shutdown() {
  if (shut_down_) {
    return;
  }
  shut_down_ = true;
  // Creates in flight end first, while their waiting clients can still be told.
  sandbox_service_->EndCreates();
  server_->Stop();
  reaper_->Stop();
  if (pool_ != nullptr) {
    pool_->Stop();  // idle pooled VMs belong to no sandbox: they go with this aboxd
  }
  sandbox_service_->Shutdown();
  alive_.reset();
  timers_->Stop();
}

Daemon::~Daemon() {
  if (server_ != nullptr) {
    Shutdown();
  }
}

}  // namespace abox::daemon
