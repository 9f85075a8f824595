// /v1/sandboxes/{id}/checkpoints, /restore, /fork, /pause, /resume.
#include "absl/strings/str_cat.h"
#include "src/api/checkpoint.h"
#include "src/api/errors.h"
#include "src/base/status_macros.h"
#include "src/daemon/handlers/query.h"
#include "src/daemon/handlers/services.h"
#include "src/daemon/resource_views.h"

namespace abox::daemon {
namespace {

using http::Request;
using http::Responder;

nlohmann::json CheckpointJson(const CheckpointInfo& c) {
  api::Checkpoint out;
  out.id = c.id;
  out.name = c.name;
  out.sandbox_id = c.sandbox_id;
  out.image = c.image;
  out.cpus = c.cpus;
  out.memory_mib = c.memory_mib;
  out.created_at = c.created_at;
  out.bytes = static_cast<int64_t>(c.bytes);
  out.save_ms = c.save_ms;
  out.workspace = c.workspace;
  return api::ToJson(out);
}

}  // namespace

absl::Status AddCheckpointRoutes(http::Router& router, Services& services) {
  SandboxService* sandboxes = services.sandboxes;

  ABOX_RETURN_IF_ERROR(router.Add("POST", "/v1/sandboxes/{id}/checkpoints",
                                  [sandboxes](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<api::CheckpointCreate> create =
                                        api::DecodeCheckpointCreate(req.body);
                                    if (!create.ok()) {
                                      return res.Error(create.status());
                                    }
                                    absl::StatusOr<CheckpointInfo> c =
                                        sandboxes->Checkpoint(req.Param("id"), create->name);
                                    if (!c.ok()) {
                                      return res.Error(c.status());
                                    }
                                    res.Json(201, CheckpointJson(*c));
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("GET", "/v1/sandboxes/{id}/checkpoints",
                                  [sandboxes](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<std::vector<CheckpointInfo>> all =
                                        sandboxes->Checkpoints(req.Param("id"));
                                    if (!all.ok()) {
                                      return res.Error(all.status());
                                    }
                                    nlohmann::json list = nlohmann::json::array();
                                    for (const CheckpointInfo& c : *all) {
                                      list.push_back(CheckpointJson(c));
                                    }
                                    res.Json(200, {{"checkpoints", std::move(list)}});
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("DELETE", "/v1/sandboxes/{id}/checkpoints/{checkpoint}",
                                  [sandboxes](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    if (absl::Status s = sandboxes->RemoveCheckpoint(
                                            req.Param("id"), req.Param("checkpoint"));
                                        !s.ok()) {
                                      return res.Error(s);
                                    }
                                    res.Send(204, "", "");
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("POST", "/v1/sandboxes/{id}/restore",
                                  [sandboxes](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<api::RestoreRequest> request =
                                        api::DecodeRestoreRequest(req.body);
                                    if (!request.ok()) {
                                      return res.Error(request.status());
                                    }
                                    absl::StatusOr<SandboxView> view =
                                        sandboxes->Restore(req.Param("id"), request->checkpoint);
                                    if (!view.ok()) {
                                      return res.Error(view.status());
                                    }
                                    res.Json(200, SandboxJson(view->record, view->live));
                                  },
                                  {.blocking = true}));

  // Pause and resume take no body: the sandbox as it is then is the answer.
  for (const char* verb : {"pause", "resume"}) {
    const bool pause = std::string_view(verb) == "pause";
    ABOX_RETURN_IF_ERROR(router.Add("POST", absl::StrCat("/v1/sandboxes/{id}/", verb),
                                    [sandboxes, pause](Request& req, Responder& res) {
                                      if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                        return res.Error(s);
                                      }
                                      absl::StatusOr<SandboxView> view =
                                          pause
                                              ? sandboxes->Pause(req.Param("id"), "pause requested")
                                              : sandboxes->Resume(req.Param("id"));
                                      if (!view.ok()) {
                                        return res.Error(view.status());
                                      }
                                      res.Json(200, SandboxJson(view->record, view->live));
                                    },
                                    {.blocking = true}));
  }

  ABOX_RETURN_IF_ERROR(
      router.Add("POST", "/v1/sandboxes/{id}/fork",
                 [sandboxes](Request& req, Responder& res) {
                   if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                     return res.Error(s);
                   }
                   absl::StatusOr<api::ForkRequest> request = api::DecodeForkRequest(req.body);
                   if (!request.ok()) {
                     return res.Error(request.status());
                   }
                   absl::StatusOr<std::vector<SandboxView>> made = sandboxes->Fork(
                       req.Param("id"), static_cast<int>(request->count), request->name_prefix);
                   if (!made.ok()) {
                     return res.Error(made.status());
                   }
                   nlohmann::json list = nlohmann::json::array();
                   for (const SandboxView& v : *made) {
                     list.push_back(SandboxJson(v.record, v.live));
                   }
                   res.Json(201, {{"sandboxes", std::move(list)}});
                 },
                 {.blocking = true}));
  return absl::OkStatus();
}

}  // namespace abox::daemon
