// What the request handlers work with. One instance per daemon; everything outlives the server.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "src/base/clock.h"
#include "src/daemon/lifecycle/state_recorder.h"
#include "src/daemon/lifecycle/warm_pool.h"
#include "src/daemon/services/egress_service.h"
#include "src/daemon/services/event_bus.h"
#include "src/daemon/services/exec_service.h"
#include "src/daemon/services/guest_tools_gate.h"
#include "src/daemon/services/ledger.h"
#include "src/daemon/services/model_service.h"
#include "src/daemon/services/sandbox_service.h"
#include "src/daemon/services/secret_service.h"
#include "src/daemon/services/workspace_service.h"
#include "src/daemon/timer_queue.h"
#include "src/http/router.h"

namespace abox::daemon {

struct Services {
  SandboxService* sandboxes = nullptr;
  ExecService* execs = nullptr;
  GuestToolsGate* guest_tools = nullptr;
  StateRecorder* recorder = nullptr;
  EventBus* events = nullptr;
  Ledger* ledger = nullptr;
  TimerQueue* timers = nullptr;
  WorkspaceService* workspaces = nullptr;
  EgressService* egress = nullptr;  // null: the egress routes answer 501
  WarmPool* pool = nullptr;         // null: no warm pool
  SecretService* secrets = nullptr;
  SecretGrants* grants = nullptr;
  ModelService* models = nullptr;
  base::Clock* clock = &base::SystemClock();
  absl::Time started;
  std::string openapi_yaml;  // served at GET /v1/openapi.yaml
};

// Every route of the API (docs/openapi.yaml describes the same set; a test checks it).
[[nodiscard]] absl::Status RegisterRoutes(http::Router& router, Services& services);

// One function per resource, each in its own file.
[[nodiscard]] absl::Status AddSandboxRoutes(http::Router& router, Services& services);
[[nodiscard]] absl::Status AddExecRoutes(http::Router& router, Services& services);
[[nodiscard]] absl::Status AddEventRoutes(http::Router& router, Services& services);
[[nodiscard]] absl::Status AddSystemRoutes(http::Router& router, Services& services);
[[nodiscard]] absl::Status AddWorkspaceRoutes(http::Router& router, Services& services);
[[nodiscard]] absl::Status AddEgressRoutes(http::Router& router, Services& services);
[[nodiscard]] absl::Status AddCheckpointRoutes(http::Router& router, Services& services);
[[nodiscard]] absl::Status AddSecretRoutes(http::Router& router, Services& services);
[[nodiscard]] absl::Status AddModelRoutes(http::Router& router, Services& services);

}  // namespace abox::daemon
