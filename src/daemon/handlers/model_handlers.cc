// /v1/models: where each model API goes and which secret holds its key (never the key), and
// what a sandbox's agents used through the broker.
#include "absl/strings/str_cat.h"
#include "src/api/model.h"
#include "src/base/status_macros.h"
#include "src/daemon/handlers/query.h"
#include "src/daemon/handlers/services.h"

namespace abox::daemon {
namespace {

using http::Request;
using http::Responder;

nlohmann::json ProviderJson(const ModelProviderView& v) {
  return api::ToJson(api::ModelProvider{.api = v.api,
                                        .secret = v.secret,
                                        .base_url = v.base_url,
                                        .configured = v.configured,
                                        .key_stored = v.key_stored,
                                        .updated_at = v.updated_at});
}

}  // namespace

absl::Status AddModelRoutes(http::Router& router, Services& services) {
  ModelService* models = services.models;  // set in aboxd; the handlers only capture it
  SandboxService* sandboxes = services.sandboxes;

  ABOX_RETURN_IF_ERROR(router.Add("GET", "/v1/models/providers",
                                  [models](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<std::vector<ModelProviderView>> all =
                                        models->Providers();
                                    if (!all.ok()) {
                                      return res.Error(all.status());
                                    }
                                    nlohmann::json list = nlohmann::json::array();
                                    for (const ModelProviderView& v : *all) {
                                      list.push_back(ProviderJson(v));
                                    }
                                    res.Json(200, {{"providers", std::move(list)}});
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("PUT", "/v1/models/providers/{api}",
                                  [models](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<api::ModelProviderSet> set =
                                        api::DecodeModelProviderSet(req.body);
                                    if (!set.ok()) {
                                      return res.Error(set.status());
                                    }
                                    absl::StatusOr<ModelProviderView> v = models->SetProvider(
                                        req.Param("api"), set->secret, set->base_url);
                                    if (!v.ok()) {
                                      return res.Error(v.status());
                                    }
                                    res.Json(200, ProviderJson(*v));
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("DELETE", "/v1/models/providers/{api}",
                                  [models](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    if (absl::Status s = models->RemoveProvider(req.Param("api"));
                                        !s.ok()) {
                                      return res.Error(s);
                                    }
                                    res.Send(204, "", "");
                                  },
                                  {.blocking = true}));

  return router.Add(
      "GET", "/v1/sandboxes/{id}/models/usage",
      [models, sandboxes](Request& req, Responder& res) {
        if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
          return res.Error(s);
        }
        absl::StatusOr<SandboxView> sandbox = sandboxes->Get(req.Param("id"));
        if (!sandbox.ok()) {
          return res.Error(sandbox.status());
        }
        absl::StatusOr<std::vector<store::ModelUsageRow>> rows = models->Usage(sandbox->record.id);
        if (!rows.ok()) {
          return res.Error(rows.status());
        }
        nlohmann::json list = nlohmann::json::array();
        for (const store::ModelUsageRow& r : *rows) {
          list.push_back(
              api::ToJson(api::ModelUsage{.api = r.api,
                                          .requests = static_cast<int64_t>(r.requests),
                                          .errors = static_cast<int64_t>(r.errors),
                                          .refused = static_cast<int64_t>(r.refused),
                                          .input_tokens = static_cast<int64_t>(r.input_tokens),
                                          .output_tokens = static_cast<int64_t>(r.output_tokens),
                                          .last_at = r.last_at}));
        }
        res.Json(200, {{"sandbox_id", sandbox->record.id},
                       {"models", sandbox->live.models},
                       {"usage", std::move(list)}});
      },
      {.blocking = true});
}

}  // namespace abox::daemon
