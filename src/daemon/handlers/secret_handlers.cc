// /v1/secrets: add or replace, list, get and remove secrets (names, hosts, sources; never
// values).
#include "absl/strings/str_cat.h"
#include "src/api/secret.h"
#include "src/base/status_macros.h"
#include "src/daemon/handlers/query.h"
#include "src/daemon/handlers/services.h"

namespace abox::daemon {
namespace {

using http::Request;
using http::Responder;

nlohmann::json SecretJson(const SecretView& v, SecretGrants* grants) {
  api::Secret secret{.name = v.spec.name,
                     .spec = secrets::SecretSpecToJson(v.spec),
                     .source = std::string(secrets::SourceKindName(v.spec.source)),
                     .stored_in = v.stored_in,
                     .created_at = v.created_at,
                     .updated_at = v.updated_at};
  if (grants != nullptr) {
    absl::StatusOr<std::vector<std::string>> users = grants->UsersOf(v.spec.name);
    if (users.ok()) {
      secret.used_by = *std::move(users);
    }
  }
  return api::ToJson(secret);
}

}  // namespace

absl::Status AddSecretRoutes(http::Router& router, Services& services) {
  SecretService* secrets = services.secrets;
  SecretGrants* grants = services.grants;

  // Blocking: a command or Vault source is read once, and the keyring may wait on an unlock.
  ABOX_RETURN_IF_ERROR(router.Add("POST", "/v1/secrets",
                                  [secrets, grants](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<api::SecretSet> set =
                                        api::DecodeSecretSet(req.body);
                                    secrets::Cleanse(req.body);  // the value's copy in the request
                                    if (!set.ok()) {
                                      return res.Error(set.status());
                                    }
                                    std::optional<secrets::SecretValue> value;
                                    if (set->value) {
                                      value.emplace(std::move(*set->value));
                                    }
                                    absl::StatusOr<SecretView> view =
                                        secrets->Set(set->spec, std::move(value));
                                    if (!view.ok()) {
                                      return res.Error(view.status());
                                    }
                                    if (grants != nullptr) {
                                      grants->SecretsChanged();
                                    }
                                    res.Json(201, SecretJson(*view, grants));
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("GET", "/v1/secrets",
                                  [secrets, grants](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<std::vector<SecretView>> all = secrets->List();
                                    if (!all.ok()) {
                                      return res.Error(all.status());
                                    }
                                    nlohmann::json list = nlohmann::json::array();
                                    for (const SecretView& v : *all) {
                                      list.push_back(SecretJson(v, grants));
                                    }
                                    res.Json(200, {{"secrets", std::move(list)}});
                                  },
                                  {.blocking = true}));

  ABOX_RETURN_IF_ERROR(router.Add("GET", "/v1/secrets/{name}",
                                  [secrets, grants](Request& req, Responder& res) {
                                    if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                                      return res.Error(s);
                                    }
                                    absl::StatusOr<SecretView> v = secrets->Get(req.Param("name"));
                                    if (!v.ok()) {
                                      return res.Error(v.status());
                                    }
                                    res.Json(200, SecretJson(*v, grants));
                                  },
                                  {.blocking = true}));

  return router.Add("DELETE", "/v1/secrets/{name}",
                    [secrets, grants](Request& req, Responder& res) {
                      if (absl::Status s = CheckQuery(req, {}); !s.ok()) {
                        return res.Error(s);
                      }
                      if (absl::Status s = secrets->Remove(req.Param("name")); !s.ok()) {
                        return res.Error(s);
                      }
                      if (grants != nullptr) {
                        grants->SecretsChanged();
                      }
                      res.Send(204, "", "");
                    },
                    {.blocking = true});
}

}  // namespace abox::daemon
