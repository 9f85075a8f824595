// Egress routes: policies (global and per sandbox, whole or rule by rule), a sandbox's
// connection and DNS log, the review queue and its decisions (approve, deny, ignore).
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/api/errors.h"
#include "src/api/json_body.h"
#include "src/api/wire.h"
#include "src/base/status_macros.h"
#include "src/daemon/handlers/query.h"
#include "src/daemon/handlers/services.h"

namespace abox::daemon {
namespace {

using http::Request;
using http::Responder;

constexpr int64_t kDefaultLogLimit = 100;
constexpr int64_t kMaxLogLimit = 10000;

absl::StatusOr<nlohmann::json> BodyObject(const Request& req) {
  if (absl::StripAsciiWhitespace(req.body).empty()) {
    return nlohmann::json::object();
  }
  return api::ParseObject(std::string_view(req.body.data(), req.body.size()));
}

// `allow_loopback`: the request's "allow_loopback": true, a person's explicit choice to let
// loopback address rules (the host's own loopback) in.
absl::StatusOr<std::vector<net::Rule>> DecodeRules(const std::vector<std::string>& texts,
                                                   absl::string_view field, bool allow_loopback) {
  std::vector<net::Rule> rules;
  for (size_t i = 0; i < texts.size(); ++i) {
    absl::StatusOr<net::Rule> rule = net::ParseRule(texts[i], {.allow_loopback = allow_loopback});
    if (!rule.ok()) {
      return api::FieldError(absl::StrCat(field, "[", i, "]"), rule.status().message());
    }
    rules.push_back(*std::move(rule));
  }
  return rules;
}

nlohmann::json PolicyJson(const net::EgressPolicy& policy) {
  nlohmann::json allow = nlohmann::json::array();
  for (const net::Rule& rule : policy.allow) {
    allow.push_back(rule.ToString());
  }
  return {{"mode", policy.mode ? nlohmann::json(std::string(net::ModeName(*policy.mode)))
                               : nlohmann::json(nullptr)},
          {"allow", std::move(allow)}};
}

// Adds "warnings" (loopback rules among `added`) to a policy answer.
nlohmann::json WithWarnings(nlohmann::json j, const std::vector<net::Rule>& added) {
  std::vector<std::string> warnings = LoopbackWarnings(added);
  if (!warnings.empty()) {
    j["warnings"] = warnings;
  }
  return j;
}

// {"mode": ..., "allow": [...], "allow_loopback": bool}: a replacement policy. A sandbox's
// mode may be null or absent (the global mode); the global one defaults to allowlist.
absl::StatusOr<net::EgressPolicy> DecodePolicy(const Request& req, bool global) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json body, BodyObject(req));
  api::Reader r(body);
  std::optional<std::string> mode;
  std::vector<std::string> allow;
  bool allow_loopback = false;
  r.OptionalString("mode", &mode, 16);
  r.OptionalStringArray("allow", &allow, 1024);
  r.OptionalBool("allow_loopback", &allow_loopback);
  ABOX_RETURN_IF_ERROR(r.Finish());
  net::EgressPolicy policy;
  if (global && !mode) {
    mode = "allowlist";
  }
  if (mode) {
    absl::StatusOr<net::EgressPolicy::Mode> parsed = net::ParseMode(*mode);
    if (!parsed.ok()) {
      return api::FieldError("mode", parsed.status().message());
    }
    policy.mode = *parsed;
  }
  ABOX_ASSIGN_OR_RETURN(policy.allow, DecodeRules(allow, "allow", allow_loopback));
  return policy;
}

nlohmann::json RequestJson(const store::EgressRequest& r) {
  nlohmann::json j = {{"sandbox", r.sandbox_id},
                      {"name", r.name},
                      {"port", r.port},
                      {"count", r.count},
                      {"first_seen", api::FormatApiTime(r.first_seen)},
                      {"last_seen", api::FormatApiTime(r.last_seen)},
                      {"state", store::EgressRequestStateName(r.state)},
                      {"reason", r.reason}};
  if (r.state == store::EgressRequestState::kApprovedOnce) {
    j["once_port"] = r.once_port;
    j["once_used"] = !r.once_left;
  }
  return j;
}

nlohmann::json ConnectionJson(const store::EgressConnectionRow& c) {
  return {{"time", api::FormatApiTime(c.time)},
          {"kind", c.kind},
          {"name", c.name},
          {"address", c.address},
          {"port", c.port},
          {"verdict", c.verdict},
          {"reason", c.reason},
          {"matched_rule", c.matched_rule},
          {"via_override", c.via_override},
          {"bytes_up", c.bytes_up},
          {"bytes_down", c.bytes_down},
          {"duration_ms", c.duration_ms}};
}

nlohmann::json DnsJson(const store::EgressDnsRow& d) {
  return {{"time", api::FormatApiTime(d.time)},
          {"name", d.name},
          {"qtype", d.qtype},
          {"verdict", d.verdict},
          {"rcode", d.rcode},
          {"answers", d.answers},
          {"reason", d.reason},
          {"matched_rule", d.matched_rule},
          {"via_override", d.via_override}};
}

// What a sandbox lost to its caps: names refused but not queued, log rows and events pruned.
nlohmann::json DroppedJson(const store::RetentionCounters& c) {
  return {{"queue", c.queue_dropped},
          {"connections", c.connections_pruned},
          {"dns", c.dns_pruned},
          {"events", c.events_pruned}};
}

using JsonFn = std::function<absl::StatusOr<nlohmann::json>(Request&)>;

// A blocking route answering 200 with what `fn` returns (or its error).
absl::Status AddJsonRoute(http::Router& router, Services* svc, absl::string_view method,
                          absl::string_view path, JsonFn fn) {
  return router.Add(
      method, path,
      [svc, fn = std::move(fn)](Request& req, Responder& res) {
        if (svc->egress == nullptr) {
          return res.Error(absl::UnimplementedError("this aboxd runs without egress"));
        }
        absl::StatusOr<nlohmann::json> out = fn(req);
        if (!out.ok()) {
          return res.Error(out.status());
        }
        res.Json(200, *out);
      },
      {.blocking = true});
}

// The sandbox's id from the {id} of the path (an id, name or unique prefix).
absl::StatusOr<std::string> SandboxId(Services* svc, const Request& req) {
  ABOX_ASSIGN_OR_RETURN(SandboxView view, svc->manager->Get(req.Param("id")));
  return view.record.id;
}

absl::StatusOr<std::string> DecodeName(const Request& req, bool* once) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json body, BodyObject(req));
  api::Reader r(body);
  std::string name;
  r.RequiredString("name", &name, 300);
  if (once != nullptr) {
    r.OptionalBool("once", once);
  }
  ABOX_RETURN_IF_ERROR(r.Finish());
  return name;
}

absl::StatusOr<nlohmann::json> ChangeRules(Services* svc, const EgressScope& scope,
                                           const Request& req) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json body, BodyObject(req));
  api::Reader r(body);
  std::vector<std::string> add;
  std::vector<std::string> remove;
  bool allow_loopback = false;
  r.OptionalStringArray("add", &add, 1024);
  r.OptionalStringArray("remove", &remove, 1024);
  r.OptionalBool("allow_loopback", &allow_loopback);
  ABOX_RETURN_IF_ERROR(r.Finish());
  if (add.empty() && remove.empty()) {
    return api::FieldError("add", "give rules to add and/or remove");
  }
  ABOX_ASSIGN_OR_RETURN(std::vector<net::Rule> to_add, DecodeRules(add, "add", allow_loopback));
  // A rule being removed was admitted once: removing it needs no flag.
  ABOX_ASSIGN_OR_RETURN(std::vector<net::Rule> to_remove,
                        DecodeRules(remove, "remove", /*allow_loopback=*/true));
  ABOX_ASSIGN_OR_RETURN(net::EgressPolicy policy,
                        svc->egress->ChangeRules(scope, to_add, to_remove));
  return WithWarnings(PolicyJson(policy), to_add);
}

absl::StatusOr<nlohmann::json> SandboxPolicyJson(Services* svc, const std::string& id) {
  ABOX_ASSIGN_OR_RETURN(net::EgressPolicy own, svc->egress->Policy(EgressScope{id}));
  ABOX_ASSIGN_OR_RETURN(net::EgressPolicy effective, svc->egress->Effective(id));
  nlohmann::json j = PolicyJson(own);
  j["sandbox"] = id;
  j["effective"] = PolicyJson(effective);
  return j;
}

}  // namespace

absl::Status AddEgressRoutes(http::Router& router, Services& services) {
  Services* svc = &services;

  ABOX_RETURN_IF_ERROR(AddJsonRoute(router, svc, "GET", "/v1/egress/policy",
                                    [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                                      ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
                                      ABOX_ASSIGN_OR_RETURN(net::EgressPolicy p,
                                                            svc->egress->Policy(EgressScope{}));
                                      return PolicyJson(p);
                                    }));
  ABOX_RETURN_IF_ERROR(AddJsonRoute(router, svc, "PUT", "/v1/egress/policy",
                                    [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                                      ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
                                      ABOX_ASSIGN_OR_RETURN(net::EgressPolicy p,
                                                            DecodePolicy(req, /*global=*/true));
                                      ABOX_RETURN_IF_ERROR(svc->egress->SetPolicy({}, p));
                                      return WithWarnings(PolicyJson(p), p.allow);
                                    }));
  ABOX_RETURN_IF_ERROR(AddJsonRoute(router, svc, "POST", "/v1/egress/rules",
                                    [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                                      ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
                                      return ChangeRules(svc, {}, req);
                                    }));

  ABOX_RETURN_IF_ERROR(AddJsonRoute(router, svc, "GET", "/v1/sandboxes/{id}/egress/policy",
                                    [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                                      ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
                                      ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
                                      return SandboxPolicyJson(svc, id);
                                    }));
  ABOX_RETURN_IF_ERROR(AddJsonRoute(
      router, svc, "PUT", "/v1/sandboxes/{id}/egress/policy",
      [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
        ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
        ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
        ABOX_ASSIGN_OR_RETURN(net::EgressPolicy p, DecodePolicy(req, /*global=*/false));
        ABOX_RETURN_IF_ERROR(svc->egress->SetPolicy(EgressScope{id}, p));
        ABOX_ASSIGN_OR_RETURN(nlohmann::json j, SandboxPolicyJson(svc, id));
        return WithWarnings(std::move(j), p.allow);
      }));
  ABOX_RETURN_IF_ERROR(AddJsonRoute(
      router, svc, "POST", "/v1/sandboxes/{id}/egress/rules",
      [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
        ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
        ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
        ABOX_ASSIGN_OR_RETURN(nlohmann::json changed, ChangeRules(svc, EgressScope{id}, req));
        ABOX_ASSIGN_OR_RETURN(nlohmann::json j, SandboxPolicyJson(svc, id));
        if (changed.contains("warnings")) {
          j["warnings"] = changed["warnings"];
        }
        return j;
      }));

  ABOX_RETURN_IF_ERROR(AddJsonRoute(
      router, svc, "GET", "/v1/sandboxes/{id}/egress/log",
      [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
        ABOX_RETURN_IF_ERROR(CheckQuery(req, {"limit"}));
        ABOX_ASSIGN_OR_RETURN(int64_t limit,
                              QueryInt(req, "limit", kDefaultLogLimit, 1, kMaxLogLimit));
        ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
        ABOX_ASSIGN_OR_RETURN(std::vector<store::EgressConnectionRow> connections,
                              svc->egress->Connections(id, static_cast<int>(limit)));
        ABOX_ASSIGN_OR_RETURN(std::vector<store::EgressDnsRow> lookups,
                              svc->egress->Lookups(id, static_cast<int>(limit)));
        nlohmann::json c = nlohmann::json::array();
        for (const auto& row : connections) {
          c.push_back(ConnectionJson(row));
        }
        nlohmann::json d = nlohmann::json::array();
        for (const auto& row : lookups) {
          d.push_back(DnsJson(row));
        }
        ABOX_ASSIGN_OR_RETURN(store::RetentionCounters dropped, svc->egress->Dropped(id));
        return nlohmann::json{{"sandbox", id},
                              {"connections", std::move(c)},
                              {"dns", std::move(d)},
                              {"dropped", DroppedJson(dropped)}};
      }));

  ABOX_RETURN_IF_ERROR(
      AddJsonRoute(router, svc, "GET", "/v1/egress/queue",
                   [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                     ABOX_RETURN_IF_ERROR(CheckQuery(req, {"sandbox", "all"}));
                     ABOX_ASSIGN_OR_RETURN(bool all, QueryBool(req, "all", false));
                     store::EgressRequestFilter filter;
                     if (std::optional<std::string> ref = req.Query("sandbox")) {
                       ABOX_ASSIGN_OR_RETURN(SandboxView view, svc->manager->Get(*ref));
                       filter.sandbox_id = view.record.id;
                     }
                     if (!all) {
                       filter.states = {store::EgressRequestState::kPending};
                     }
                     ABOX_ASSIGN_OR_RETURN(std::vector<store::EgressRequest> requests,
                                           svc->egress->Requests(filter));
                     nlohmann::json list = nlohmann::json::array();
                     for (const auto& r : requests) {
                       list.push_back(RequestJson(r));
                     }
                     ABOX_ASSIGN_OR_RETURN(auto dropped, svc->egress->QueueDropped());
                     nlohmann::json full = nlohmann::json::array();
                     for (const auto& [sandbox, count] : dropped) {
                       if (!filter.sandbox_id || *filter.sandbox_id == sandbox) {
                         full.push_back({{"sandbox", sandbox}, {"dropped", count}});
                       }
                     }
                     return nlohmann::json{{"requests", std::move(list)},
                                           {"queue_cap", svc->egress->queue_cap()},
                                           {"queue_full", std::move(full)}};
                   }));

  ABOX_RETURN_IF_ERROR(AddJsonRoute(
      router, svc, "POST", "/v1/sandboxes/{id}/egress/approve",
      [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
        ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
        bool once = true;
        ABOX_ASSIGN_OR_RETURN(std::string name, DecodeName(req, &once));
        ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
        ABOX_ASSIGN_OR_RETURN(ApprovalResult result, svc->egress->Approve(id, name, once));
        nlohmann::json j = {{"request", RequestJson(result.request)}};
        if (!result.rule.empty()) {
          j["rule"] = result.rule;
        }
        if (!result.note.empty()) {
          j["note"] = result.note;
        }
        return j;
      }));
  ABOX_RETURN_IF_ERROR(
      AddJsonRoute(router, svc, "POST", "/v1/sandboxes/{id}/egress/deny",
                   [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                     ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
                     ABOX_ASSIGN_OR_RETURN(std::string name, DecodeName(req, nullptr));
                     ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
                     ABOX_ASSIGN_OR_RETURN(store::EgressRequest r, svc->egress->Deny(id, name));
                     return nlohmann::json{{"request", RequestJson(r)}};
                   }));
  ABOX_RETURN_IF_ERROR(
      AddJsonRoute(router, svc, "POST", "/v1/egress/ignore",
                   [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                     ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
                     ABOX_ASSIGN_OR_RETURN(std::string name, DecodeName(req, nullptr));
                     ABOX_ASSIGN_OR_RETURN(int64_t changed, svc->egress->Ignore(name));
                     return nlohmann::json{{"name", name}, {"requests_changed", changed}};
                   }));
  return absl::OkStatus();
}

}  // namespace abox::daemon
