// Workspace routes: /v1/sandboxes/{id}/sync, /diff, /apply, /pull; /v1/artifacts and undo.
#include "absl/strings/str_cat.h"
#include "src/api/errors.h"
#include "src/api/workspace.h"
#include "src/base/status_macros.h"
#include "src/daemon/handlers/query.h"
#include "src/daemon/handlers/services.h"
#include "src/daemon/handlers/workspace_json.h"

namespace abox::daemon {
namespace {

using http::Request;
using http::Responder;

absl::StatusOr<ApplyRequest> DecodeApply(const Request& req) {
  ABOX_ASSIGN_OR_RETURN(api::ApplyRequest a, api::DecodeApplyRequest(req.body));
  return ApplyRequest{.paths = std::move(a.paths),
                      .dry_run = a.dry_run,
                      .markers = a.markers,
                      .allow_exec_files = a.allow_exec_files};
}

absl::StatusOr<PullRequest> DecodePull(const Request& req) {
  ABOX_ASSIGN_OR_RETURN(api::PullRequest p, api::DecodePullRequest(req.body));
  return PullRequest{.paths = std::move(p.paths), .to = std::move(p.to), .force = p.force};
}

// Runs a workspace operation through the sandbox's guest tools on a blocking handler thread.
template <typename Fn>
void WithTools(Services& services, Request& req, Responder& res, Fn fn) {
  absl::Status s = services.guest_tools->WithGuestTools(
      req.Param("id"), [&](const store::SandboxRecord& record, workspace::GuestTools& tools) {
        return fn(record.id, tools);
      });
  if (!s.ok() && !res.responded()) {
    res.Error(s);
  }
}

}  // namespace

absl::Status AddWorkspaceRoutes(http::Router& router, Services& services) {
  Services* svc = &services;
  if (services.workspaces == nullptr) {
    // The routes exist (the API is the same everywhere); without the service they say so.
    for (const auto& [method, path] : std::vector<std::pair<const char*, const char*>>{
             {"POST", "/v1/sandboxes/{id}/sync"},
             {"GET", "/v1/sandboxes/{id}/diff"},
             {"POST", "/v1/sandboxes/{id}/apply"},
             {"POST", "/v1/sandboxes/{id}/pull"},
             {"GET", "/v1/artifacts"},
             {"POST", "/v1/artifacts/{artifact}/undo"}}) {
      ABOX_RETURN_IF_ERROR(router.Add(method, path, [](Request&, Responder& res) {
        res.Error(absl::UnimplementedError("this aboxd runs without workspaces"));
      }));
    }
    return absl::OkStatus();
  }
  ABOX_RETURN_IF_ERROR(router.Add(
      "POST", "/v1/sandboxes/{id}/sync",
      [svc](Request& req, Responder& res) {
        if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
          return res.Error(s);
        }
        WithTools(*svc, req, res, [&](const std::string& id, workspace::GuestTools& tools) {
          ABOX_ASSIGN_OR_RETURN(workspace::SyncReport report, svc->workspaces->Sync(id, tools));
          res.Json(200, SyncReportToJson(report));
          return absl::OkStatus();
        });
      },
      {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add(
      "GET", "/v1/sandboxes/{id}/diff",
      [svc](Request& req, Responder& res) {
        absl::Status query = CheckQuery(req, {"path", "stat", "context"});
        absl::StatusOr<bool> stat = QueryBool(req, "stat", false);
        absl::StatusOr<int64_t> context = QueryInt(req, "context", 3, 0, 1000);
        for (const absl::Status& s : {query, stat.status(), context.status()}) {
          if (!s.ok()) {
            return res.Error(s);
          }
        }
        workspace::DiffOptions options;
        options.patches = !*stat;
        options.context_lines = static_cast<int>(*context);
        std::vector<std::string> paths = req.QueryAll("path");
        WithTools(*svc, req, res, [&](const std::string& id, workspace::GuestTools& tools) {
          ABOX_ASSIGN_OR_RETURN(DiffOutcome diff, svc->workspaces->Diff(id, tools, paths, options));
          res.Json(200, DiffToJson(diff));
          return absl::OkStatus();
        });
      },
      {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add(
      "POST", "/v1/sandboxes/{id}/apply",
      [svc](Request& req, Responder& res) {
        absl::Status query = CheckQuery(req, {});
        absl::StatusOr<ApplyRequest> request = DecodeApply(req);
        if (!query.ok() || !request.ok()) {
          return res.Error(!query.ok() ? query : request.status());
        }
        WithTools(*svc, req, res, [&](const std::string& id, workspace::GuestTools& tools) {
          ABOX_ASSIGN_OR_RETURN(ApplyOutcome out, svc->workspaces->Apply(id, tools, *request));
          RespondApply(res, out);
          return absl::OkStatus();
        });
      },
      {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add(
      "POST", "/v1/sandboxes/{id}/pull",
      [svc](Request& req, Responder& res) {
        absl::Status query = CheckQuery(req, {});
        absl::StatusOr<PullRequest> request = DecodePull(req);
        if (!query.ok() || !request.ok()) {
          return res.Error(!query.ok() ? query : request.status());
        }
        WithTools(*svc, req, res, [&](const std::string& id, workspace::GuestTools& tools) {
          ABOX_ASSIGN_OR_RETURN(ApplyOutcome out, svc->workspaces->Pull(id, tools, *request));
          RespondApply(res, out);
          return absl::OkStatus();
        });
      },
      {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("GET", "/v1/artifacts",
                                  [svc](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<std::vector<workspace::ArtifactSummary>> list =
                                        svc->workspaces->Artifacts();
                                    if (!list.ok()) {
                                      return res.Error(list.status());
                                    }
                                    std::vector<api::Artifact> items;
                                    for (const workspace::ArtifactSummary& a : *list) {
                                      items.push_back(ArtifactOf(a));
                                    }
                                    res.Json(200, api::ArtifactListToJson(items));
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("POST", "/v1/artifacts/{artifact}/undo",
                                  [svc](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<bool> force = api::DecodeUndoRequest(req.body);
                                    if (!force.ok()) {
                                      return res.Error(force.status());
                                    }
                                    absl::StatusOr<workspace::UndoResult> undone =
                                        svc->workspaces->Undo(req.Param("artifact"), *force);
                                    if (!undone.ok()) {
                                      return res.Error(undone.status());
                                    }
                                    res.Json(200, UndoToJson(*undone));
                                  },
                                  {.blocking = true}));
  return absl::OkStatus();
}

}  // namespace abox::daemon
