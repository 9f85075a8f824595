// /v1/sandboxes: create, list, get, stop, delete, console log.
#include "absl/strings/str_cat.h"
#include "src/api/errors.h"
#include "src/api/sandbox.h"
#include "src/base/status_macros.h"
#include "src/daemon/handlers/query.h"
#include "src/daemon/handlers/services.h"
#include "src/daemon/resource_views.h"

namespace abox::daemon {
namespace {

using http::Request;
using http::Responder;

nlohmann::json ViewJson(const SandboxView& view) { return SandboxJson(view.record, view.live); }

absl::StatusOr<store::SandboxFilter> FilterOf(const Request& request) {
  ABOX_RETURN_IF_ERROR(CheckQuery(request, {"label", "state"}));
  store::SandboxFilter filter;
  for (const std::string& label : request.QueryAll("label")) {
    size_t eq = label.find('=');
    if (eq == std::string::npos || eq == 0) {
      return api::FieldError("label",
                             absl::StrCat("label filters are key=value, got \"", label, "\""));
    }
    filter.labels[label.substr(0, eq)] = label.substr(eq + 1);
  }
  for (const std::string& state : request.QueryAll("state")) {
    absl::StatusOr<store::SandboxState> parsed = store::ParseSandboxState(state);
    if (!parsed.ok()) {
      return api::FieldError("state", absl::StrCat("unknown state \"", state,
                                                   "\" (creating, ready, stopping, stopped, "
                                                   "failed, paused)"));
    }
    filter.states.push_back(*parsed);
  }
  return filter;
}

}  // namespace

absl::Status AddSandboxRoutes(http::Router& router, Services& services) {
  SandboxService* sandboxes = services.sandboxes;

  ABOX_RETURN_IF_ERROR(
      router.Add("GET", "/v1/sandboxes", [sandboxes](Request& req, Responder& res) {
        absl::StatusOr<store::SandboxFilter> filter = FilterOf(req);
        if (!filter.ok()) {
          return res.Error(filter.status());
        }
        absl::StatusOr<std::vector<SandboxView>> views = sandboxes->List(*filter);
        if (!views.ok()) {
          return res.Error(views.status());
        }
        nlohmann::json list = nlohmann::json::array();
        for (const SandboxView& v : *views) {
          list.push_back(ViewJson(v));
        }
        res.Json(200, {{"sandboxes", std::move(list)}});
      }));

  ABOX_RETURN_IF_ERROR(router.Add("POST", "/v1/sandboxes",
                                  [sandboxes](Request& req, Responder& res) {
                                    absl::Status query = CheckQuery(req, {"wait"});
                                    absl::StatusOr<bool> wait = QueryBool(req, "wait", true);
                                    if (!query.ok() || !wait.ok()) {
                                      return res.Error(!query.ok() ? query : wait.status());
                                    }
                                    absl::StatusOr<api::SandboxCreate> create =
                                        api::DecodeSandboxCreate(req.body);
                                    if (!create.ok()) {
                                      return res.Error(create.status());
                                    }
                                    // Admission runs here (a blocking worker); the boot, sync and
                                    // setup run on a thread of the create's own, which answers a
                                    // waiting client when done.
                                    bool wait_for_it = *wait;
                                    sandboxes->Create(
                                        *create,
                                        [res, wait_for_it](const SandboxView& accepted) mutable {
                                          if (!wait_for_it) {
                                            res.Json(202, ViewJson(accepted));
                                          }
                                        },
                                        [res](absl::StatusOr<SandboxView> view) mutable {
                                          if (res.responded()) {
                                            return;  // 202 went out at acceptance; the outcome
                                                     // shows in GET and the events
                                          }
                                          if (!view.ok()) {
                                            return res.Error(view.status());
                                          }
                                          res.Json(201, ViewJson(*view));
                                        });
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(
      router.Add("GET", "/v1/sandboxes/{id}", [sandboxes](Request& req, Responder& res) {
        if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
          return res.Error(s);
        }
        absl::StatusOr<SandboxView> view = sandboxes->Get(req.Param("id"));
        if (!view.ok()) {
          return res.Error(view.status());
        }
        res.Json(200, ViewJson(*view));
      }));

  ABOX_RETURN_IF_ERROR(router.Add("DELETE", "/v1/sandboxes/{id}",
                                  [sandboxes](Request& req, Responder& res) {
                                    absl::Status query = CheckQuery(req, {"force"});
                                    absl::StatusOr<bool> force = QueryBool(req, "force", false);
                                    if (!query.ok() || !force.ok()) {
                                      return res.Error(!query.ok() ? query : force.status());
                                    }
                                    if (absl::Status s = sandboxes->Remove(req.Param("id"), *force);
                                        !s.ok()) {
                                      return res.Error(s);
                                    }
                                    res.Send(204, "", "");
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("POST", "/v1/sandboxes/{id}/stop",
                                  [sandboxes](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<SandboxView> view =
                                        sandboxes->Stop(req.Param("id"));
                                    if (!view.ok()) {
                                      return res.Error(view.status());
                                    }
                                    res.Json(200, ViewJson(*view));
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("GET", "/v1/sandboxes/{id}/console",
                                  [sandboxes](Request& req, Responder& res) {
                                    absl::Status query = CheckQuery(req, {"tail"});
                                    absl::StatusOr<int64_t> tail =
                                        QueryInt(req, "tail", 65536, 1, 4 << 20);
                                    if (!query.ok() || !tail.ok()) {
                                      return res.Error(!query.ok() ? query : tail.status());
                                    }
                                    absl::StatusOr<std::string> log = sandboxes->ConsoleLog(
                                        req.Param("id"), static_cast<size_t>(*tail));
                                    if (!log.ok()) {
                                      return res.Error(log.status());
                                    }
                                    res.Send(200, "text/plain; charset=utf-8", *std::move(log));
                                  },
                                  {.blocking = true}));
  return absl::OkStatus();
}

}  // namespace abox::daemon
