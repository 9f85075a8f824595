// /v1/health, /v1/version, /v1/openapi.yaml.
#include <unistd.h>

#include "src/api/system.h"
#include "src/base/status_macros.h"
#include "src/base/version.h"
#include "src/daemon/handlers/query.h"
#include "src/daemon/handlers/services.h"
#include "src/http/openapi_route.h"
#include "src/proto/frame.h"

namespace abox::daemon {

absl::Status AddSystemRoutes(http::Router& router, Services& services) {
  Services* s = &services;
  ABOX_RETURN_IF_ERROR(
      router.Add("GET", "/v1/health", [s](http::Request& req, http::Responder& res) {
        if (absl::Status q = CheckQuery(req, {}); !q.ok()) {
          return res.Error(q);
        }
        LedgerUsage usage = s->ledger->Usage();
        api::Health health{
            .status = "ok",
            .pid = ::getpid(),
            .uptime_seconds = absl::ToDoubleSeconds(s->clock->Now() - s->started),
            .sandboxes = s->sandboxes->RunningCount(),
            .ledger = api::Ledger{.cpus_used = usage.cpus,
                                  .cpus_budget = usage.budget.cpus,
                                  .memory_mib_used = usage.memory_mib,
                                  .memory_mib_budget = usage.budget.memory_mib},
            .accel = s->sandboxes->LastAccel(),
        };
        if (s->pool != nullptr) {
          PoolStatus pool = s->pool->Status();
          api::Pool out{.size = pool.size,
                        .handed_out = pool.handed_out,
                        .made = pool.made,
                        .drained = pool.drained,
                        .memory_low = pool.memory_low};
          for (const PoolShapeStatus& shape : pool.shapes) {
            out.shapes.push_back({.image = shape.shape.image,
                                  .cpus = shape.shape.cpus,
                                  .memory_mib = shape.shape.memory_mib,
                                  .idle = shape.idle,
                                  .filling = shape.filling,
                                  .last_error = shape.last_error});
          }
          health.pool = std::move(out);
        }
        res.Json(200, api::ToJson(health));
      }));
  ABOX_RETURN_IF_ERROR(
      router.Add("GET", "/v1/version", [](http::Request& req, http::Responder& res) {
        if (absl::Status q = CheckQuery(req, {}); !q.ok()) {
          return res.Error(q);
        }
        res.Json(200, api::ToJson(api::Version{
                          .version = kVersion, .api = "v1", .protocol = proto::kProtocolVersion}));
      }));
  return http::AddOpenApiRoute(router, services.openapi_yaml);
}

absl::Status RegisterRoutes(http::Router& router, Services& services) {
  ABOX_RETURN_IF_ERROR(AddSystemRoutes(router, services));
  ABOX_RETURN_IF_ERROR(AddSandboxRoutes(router, services));
  ABOX_RETURN_IF_ERROR(AddExecRoutes(router, services));
  ABOX_RETURN_IF_ERROR(AddEventRoutes(router, services));
  ABOX_RETURN_IF_ERROR(AddWorkspaceRoutes(router, services));
  ABOX_RETURN_IF_ERROR(AddCheckpointRoutes(router, services));
  ABOX_RETURN_IF_ERROR(AddEgressRoutes(router, services));
  ABOX_RETURN_IF_ERROR(AddSecretRoutes(router, services));
  ABOX_RETURN_IF_ERROR(AddModelRoutes(router, services));
  return absl::OkStatus();
}

}  // namespace abox::daemon
