// The one composition root of aboxd: the store, the services in order, the routes and the
// server; recovery in order at Start, shutdown in order. aboxd's main and the test daemon
// (src/daemon/testing/test_daemon.h) both build the daemon here, with different boundaries
// (QEMU or a fake VMM, the system clock or a fake one).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/base/clock.h"
#include "src/base/host_layout.h"
#include "src/daemon/handlers/services.h"
#include "src/daemon/lifecycle/live_sandbox.h"
#include "src/daemon/lifecycle/reaper.h"
#include "src/daemon/lifecycle/sandbox_context.h"
#include "src/daemon/lifecycle/state_recorder.h"
#include "src/daemon/services/egress_service.h"
#include "src/daemon/services/event_bus.h"
#include "src/daemon/services/exec_service.h"
#include "src/daemon/services/guest_tools_gate.h"
#include "src/daemon/services/ledger.h"
#include "src/daemon/services/model_service.h"
#include "src/daemon/services/sandbox_service.h"
#include "src/daemon/services/secret_service.h"
#include "src/daemon/services/setup_runner.h"
#include "src/daemon/services/workspace_service.h"
#include "src/daemon/timer_queue.h"
#include "src/http/server.h"
#include "src/store/database.h"
#include "src/store/egress_repo.h"
#include "src/store/event_repo.h"
#include "src/store/exec_repo.h"
#include "src/store/grant_repo.h"
#include "src/store/model_repo.h"
#include "src/store/sandbox_repo.h"
#include "src/store/secret_repo.h"
#include "src/vmm/vmm.h"

namespace abox::daemon {

// Everything aboxd is configured with, resolved once (flags, environment) by its caller.
struct DaemonConfig {
  base::HostLayout layout;
  // unix_socket_path is required; the rest as http::ServerOptions says.
  http::ServerOptions server;
  Budget budget;
  EgressServiceOptions egress;
  SandboxOptions sandbox;
  // The warm pool (size 0: none). It keeps VMs of `pool_shapes` from the start, and of the
  // shapes creates ask for.
  PoolOptions pool;
  std::vector<PoolShape> pool_shapes;
  // What each sandbox's guest content may take of the host's disk (diff / apply / pull).
  workspace::StoreBudget workspace_budget;
  std::string openapi_yaml;  // served at GET /v1/openapi.yaml
  // Tests only (aboxd --test-upstream-ca): CA files trusted for upstreams of intercepted
  // connections on top of the host's trust store.
  std::vector<std::string> upstream_ca_files;
  // Each sandbox's model broker: requests per minute (a bucket of a tenth of it, at least 1,
  // absorbs bursts) and at most 16 in flight (aboxd --model-requests-per-minute).
  int model_requests_per_minute = 600;
};

// The boundaries, injected.
struct DaemonDeps {
  std::unique_ptr<vmm::Vmm> vmm;  // null: QEMU, with this user's settings
  base::Clock* clock = nullptr;   // null: the system clock
  // Where stored secrets' values go. Null: the keyring when one answers, else a 0600 file in
  // $ABOX_HOME/secrets.
  SecretService::ValueStoreOpener secret_values;
};

class Daemon final {
 public:
  // Takes the socket's lock first (held by another aboxd: kAlreadyExists, and nothing else is
  // touched), then opens the state and builds every service and the server, which keeps the
  // lock. Serves nothing until Start().
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(DaemonConfig config, DaemonDeps deps);
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  ~Daemon();

  // Recovers what the previous aboxd left (interrupted applies, then sandboxes), serves, and
  // starts the TTL / idle reaper.
  [[nodiscard]] absl::Status Start();
  // Ends the creates in flight (their clients hear so), stops serving, leaves every running
  // sandbox running (for the next aboxd), stops the timers. Idempotent.
  void Shutdown();

  [[nodiscard]] http::Server& server() { return *server_; }
  [[nodiscard]] SandboxService& sandboxes() { return *sandbox_service_; }
  [[nodiscard]] ExecService& execs() { return *exec_service_; }
  [[nodiscard]] GuestToolsGate& guest_tools() { return *gate_; }
  [[nodiscard]] SetupRunner& setup() { return *setup_runner_; }
  [[nodiscard]] SandboxContext& context() { return *context_; }
  [[nodiscard]] Reaper& reaper() { return *reaper_; }
  [[nodiscard]] StateRecorder& recorder() { return *recorder_; }
  [[nodiscard]] Ledger& ledger() { return *ledger_; }
  [[nodiscard]] EventBus& events() { return *events_; }
  [[nodiscard]] WorkspaceService& workspaces() { return *workspaces_; }
  [[nodiscard]] EgressService& egress() { return *egress_; }
  [[nodiscard]] SecretGrants& grants() { return *grants_; }
  [[nodiscard]] ModelService& models() { return *models_; }
  [[nodiscard]] store::SandboxRepo& sandbox_repo() { return *sandbox_repo_; }
  [[nodiscard]] store::ExecRepo& exec_repo() { return *exec_repo_; }
  [[nodiscard]] vmm::Vmm& vmm() { return *vmm_; }
  [[nodiscard]] WarmPool* pool() { return pool_.get(); }
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& routes() const {
    return routes_;
  }

 private:
  Daemon() = default;
  // The warm pool's boundaries: VMs started like a create's (restored from the golden template
  // when there is one), images opened like a create's.
  PoolDeps MakePoolDeps();

  DaemonConfig config_;
  base::Clock* clock_ = nullptr;
  std::unique_ptr<vmm::Vmm> vmm_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<store::SandboxRepo> sandbox_repo_;
  std::unique_ptr<store::ExecRepo> exec_repo_;
  std::unique_ptr<store::EventRepo> event_repo_;
  std::unique_ptr<store::EgressRepo> egress_repo_;
  std::unique_ptr<store::SecretRepo> secret_repo_;
  std::unique_ptr<SecretService> secrets_;
  std::unique_ptr<store::GrantRepo> grant_repo_;
  std::unique_ptr<SecretGrants> grants_;
  std::unique_ptr<EventBus> events_;
  std::unique_ptr<store::ModelRepo> model_repo_;
  std::unique_ptr<ModelService> models_;  // used by egress proxies: declared before egress_
  std::unique_ptr<Ledger> ledger_;
  std::unique_ptr<TimerQueue> timers_;
  std::unique_ptr<EgressService> egress_;
  std::unique_ptr<WorkspaceService> workspaces_;
  std::unique_ptr<GoldenTemplates> templates_;    // null without golden snapshots
  std::unique_ptr<CheckpointStore> checkpoints_;  // null when the VMM cannot save state
  std::unique_ptr<WarmPool> pool_;                // null without a pool
  std::unique_ptr<StateRecorder> recorder_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<SandboxContext> context_;
  std::unique_ptr<GuestToolsGate> gate_;
  std::unique_ptr<ExecService> exec_service_;
  std::unique_ptr<SetupRunner> setup_runner_;
  std::unique_ptr<SandboxService> sandbox_service_;
  std::unique_ptr<Reaper> reaper_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  Services services_;
  std::vector<std::pair<std::string, std::string>> routes_;
  std::unique_ptr<http::Server> server_;
  bool shut_down_ = false;
};

}  // namespace abox::daemon
