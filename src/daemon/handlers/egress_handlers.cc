// Egress routes: policies (global and per sandbox, whole or rule by rule), a sandbox's
// connection and DNS log, the review queue and its decisions (approve, deny, ignore).
#include <functional>

#include "absl/strings/str_cat.h"
#include "src/api/egress.h"
#include "src/api/errors.h"
#include "src/base/status_macros.h"
#include "src/daemon/handlers/query.h"
#include "src/daemon/handlers/services.h"

namespace abox::daemon {
namespace {

using http::Request;
using http::Responder;

constexpr int64_t kDefaultLogLimit = 100;
constexpr int64_t kMaxLogLimit = 10000;

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

api::EgressRules RulesOf(const net::EgressPolicy& policy) {
  api::EgressRules rules;
  if (policy.mode) {
    rules.mode = std::string(net::ModeName(*policy.mode));
  }
  for (const net::Rule& rule : policy.allow) {
    rules.allow.push_back(rule.ToString());
  }
  return rules;
}

// A policy answer, with the warnings about loopback rules among `added`.
api::EgressPolicy PolicyOf(const net::EgressPolicy& policy,
                           const std::vector<net::Rule>& added = {}) {
  return {.rules = RulesOf(policy), .warnings = LoopbackWarnings(added)};
}

// {"mode": ..., "allow": [...], "allow_loopback": bool}: a replacement policy. A sandbox's
// mode may be null or absent (the global mode); the global one defaults to allowlist.
absl::StatusOr<net::EgressPolicy> DecodePolicy(const Request& req, bool global) {
  ABOX_ASSIGN_OR_RETURN(api::EgressPolicyUpdate update, api::DecodeEgressPolicyUpdate(req.body));
  std::optional<std::string>& mode = update.rules.mode;
  const std::vector<std::string>& allow = update.rules.allow;
  const bool allow_loopback = update.allow_loopback;
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

api::EgressRequest RequestOf(const store::EgressRequest& r) {
  api::EgressRequest q{.sandbox = r.sandbox_id,
                       .name = r.name,
                       .port = r.port,
                       .count = r.count,
                       .first_seen = r.first_seen,
                       .last_seen = r.last_seen,
                       .state = store::EgressRequestStateName(r.state),
                       .reason = r.reason};
  if (r.state == store::EgressRequestState::kApprovedOnce) {
    q.once_port = r.once_port;
    q.once_used = !r.once_left;
  }
  return q;
}

api::EgressConnection ConnectionOf(const store::EgressConnectionRow& c) {
  return {.time = c.time,
          .kind = c.kind,
          .name = c.name,
          .address = c.address,
          .port = c.port,
          .verdict = c.verdict,
          .reason = c.reason,
          .matched_rule = c.matched_rule,
          .via_override = c.via_override,
          .bytes_up = c.bytes_up,
          .bytes_down = c.bytes_down,
          .duration_ms = c.duration_ms};
}

api::EgressLookup LookupOf(const store::EgressDnsRow& d) {
  return {.time = d.time,
          .name = d.name,
          .qtype = d.qtype,
          .verdict = d.verdict,
          .rcode = d.rcode,
          .answers = d.answers,
          .reason = d.reason,
          .matched_rule = d.matched_rule,
          .via_override = d.via_override};
}

// What a sandbox lost to its caps: names refused but not queued, log rows and events pruned.
api::EgressLog::Dropped DroppedOf(const store::RetentionCounters& c) {
  return {.queue = c.queue_dropped,
          .connections = c.connections_pruned,
          .dns = c.dns_pruned,
          .events = c.events_pruned};
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
  ABOX_ASSIGN_OR_RETURN(SandboxView view, svc->sandboxes->Get(req.Param("id")));
  return view.record.id;
}

absl::StatusOr<std::string> DecodeName(const Request& req, bool* once) {
  ABOX_ASSIGN_OR_RETURN(api::EgressName name, api::DecodeEgressName(req.body, once != nullptr));
  if (once != nullptr && name.once) {
    *once = *name.once;
  }
  return std::move(name.name);
}

absl::StatusOr<api::EgressPolicy> ChangeRules(Services* svc, const EgressScope& scope,
                                              const Request& req) {
  ABOX_ASSIGN_OR_RETURN(api::EgressRuleChange change, api::DecodeEgressRuleChange(req.body));
  ABOX_ASSIGN_OR_RETURN(std::vector<net::Rule> to_add,
                        DecodeRules(change.add, "add", change.allow_loopback));
  // A rule being removed was admitted once: removing it needs no flag.
  ABOX_ASSIGN_OR_RETURN(std::vector<net::Rule> to_remove,
                        DecodeRules(change.remove, "remove", /*allow_loopback=*/true));
  ABOX_ASSIGN_OR_RETURN(net::EgressPolicy policy,
                        svc->egress->ChangeRules(scope, to_add, to_remove));
  return PolicyOf(policy, to_add);
}

absl::StatusOr<api::EgressPolicy> SandboxPolicyOf(Services* svc, const std::string& id,
                                                  const std::vector<net::Rule>& added = {}) {
  ABOX_ASSIGN_OR_RETURN(net::EgressPolicy own, svc->egress->Policy(EgressScope{id}));
  ABOX_ASSIGN_OR_RETURN(net::EgressPolicy effective, svc->egress->Effective(id));
  return api::EgressPolicy{.rules = RulesOf(own),
                           .sandbox = id,
                           .effective = RulesOf(effective),
                           .warnings = LoopbackWarnings(added)};
}

}  // namespace

absl::Status AddEgressRoutes(http::Router& router, Services& services) {
  Services* svc = &services;

  ABOX_RETURN_IF_ERROR(AddJsonRoute(router, svc, "GET", "/v1/egress/policy",
                                    [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                                      ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
                                      ABOX_ASSIGN_OR_RETURN(net::EgressPolicy p,
                                                            svc->egress->Policy(EgressScope{}));
                                      return api::ToJson(PolicyOf(p));
                                    }));
  ABOX_RETURN_IF_ERROR(AddJsonRoute(router, svc, "PUT", "/v1/egress/policy",
                                    [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                                      ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
                                      ABOX_ASSIGN_OR_RETURN(net::EgressPolicy p,
                                                            DecodePolicy(req, /*global=*/true));
                                      ABOX_RETURN_IF_ERROR(svc->egress->SetPolicy({}, p));
                                      return api::ToJson(PolicyOf(p, p.allow));
                                    }));
  ABOX_RETURN_IF_ERROR(AddJsonRoute(router, svc, "POST", "/v1/egress/rules",
                                    [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                                      ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
                                      ABOX_ASSIGN_OR_RETURN(api::EgressPolicy p,
                                                            ChangeRules(svc, {}, req));
                                      return api::ToJson(p);
                                    }));

  ABOX_RETURN_IF_ERROR(AddJsonRoute(router, svc, "GET", "/v1/sandboxes/{id}/egress/policy",
                                    [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                                      ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
                                      ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
                                      ABOX_ASSIGN_OR_RETURN(api::EgressPolicy p,
                                                            SandboxPolicyOf(svc, id));
                                      return api::ToJson(p);
                                    }));
  ABOX_RETURN_IF_ERROR(AddJsonRoute(
      router, svc, "PUT", "/v1/sandboxes/{id}/egress/policy",
      [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
        ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
        ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
        ABOX_ASSIGN_OR_RETURN(net::EgressPolicy p, DecodePolicy(req, /*global=*/false));
        ABOX_RETURN_IF_ERROR(svc->egress->SetPolicy(EgressScope{id}, p));
        ABOX_ASSIGN_OR_RETURN(api::EgressPolicy policy, SandboxPolicyOf(svc, id, p.allow));
        return api::ToJson(policy);
      }));
  ABOX_RETURN_IF_ERROR(AddJsonRoute(
      router, svc, "POST", "/v1/sandboxes/{id}/egress/rules",
      [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
        ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
        ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
        ABOX_ASSIGN_OR_RETURN(api::EgressPolicy changed, ChangeRules(svc, EgressScope{id}, req));
        ABOX_ASSIGN_OR_RETURN(api::EgressPolicy policy, SandboxPolicyOf(svc, id));
        policy.warnings = std::move(changed.warnings);
        return api::ToJson(policy);
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
        api::EgressLog log{.sandbox = id};
        for (const auto& row : connections) {
          log.connections.push_back(ConnectionOf(row));
        }
        for (const auto& row : lookups) {
          log.dns.push_back(LookupOf(row));
        }
        ABOX_ASSIGN_OR_RETURN(store::RetentionCounters dropped, svc->egress->Dropped(id));
        log.dropped = DroppedOf(dropped);
        return api::ToJson(log);
      }));

  ABOX_RETURN_IF_ERROR(
      AddJsonRoute(router, svc, "GET", "/v1/egress/queue",
                   [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                     ABOX_RETURN_IF_ERROR(CheckQuery(req, {"sandbox", "all"}));
                     ABOX_ASSIGN_OR_RETURN(bool all, QueryBool(req, "all", false));
                     store::EgressRequestFilter filter;
                     if (std::optional<std::string> ref = req.Query("sandbox")) {
                       ABOX_ASSIGN_OR_RETURN(SandboxView view, svc->sandboxes->Get(*ref));
                       filter.sandbox_id = view.record.id;
                     }
                     if (!all) {
                       filter.states = {store::EgressRequestState::kPending};
                     }
                     ABOX_ASSIGN_OR_RETURN(std::vector<store::EgressRequest> requests,
                                           svc->egress->Requests(filter));
                     api::EgressQueue queue{.queue_cap = svc->egress->queue_cap()};
                     for (const auto& r : requests) {
                       queue.requests.push_back(RequestOf(r));
                     }
                     ABOX_ASSIGN_OR_RETURN(auto dropped, svc->egress->QueueDropped());
                     for (const auto& [sandbox, count] : dropped) {
                       if (!filter.sandbox_id || *filter.sandbox_id == sandbox) {
                         queue.queue_full.push_back({.sandbox = sandbox, .dropped = count});
                       }
                     }
                     return api::ToJson(queue);
                   }));

  ABOX_RETURN_IF_ERROR(AddJsonRoute(
      router, svc, "POST", "/v1/sandboxes/{id}/egress/approve",
      [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
        ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
        bool once = true;
        ABOX_ASSIGN_OR_RETURN(std::string name, DecodeName(req, &once));
        ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
        ABOX_ASSIGN_OR_RETURN(ApprovalResult result, svc->egress->Approve(id, name, once));
        return api::ToJson(api::EgressDecision{
            .request = RequestOf(result.request), .rule = result.rule, .note = result.note});
      }));
  ABOX_RETURN_IF_ERROR(AddJsonRoute(
      router, svc, "POST", "/v1/sandboxes/{id}/egress/ask",
      [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
        ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
        ABOX_ASSIGN_OR_RETURN(api::EgressAsk ask, api::DecodeEgressAsk(req.body));
        ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
        ABOX_ASSIGN_OR_RETURN(AskResult result, svc->egress->Ask(id, ask.name, ask.reason));
        return api::ToJson(api::EgressAskAnswer{.request = RequestOf(result.request),
                                                .allowed = result.allowed,
                                                .queue_full = result.queue_full});
      }));
  ABOX_RETURN_IF_ERROR(
      AddJsonRoute(router, svc, "POST", "/v1/sandboxes/{id}/egress/deny",
                   [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
                     ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
                     ABOX_ASSIGN_OR_RETURN(std::string name, DecodeName(req, nullptr));
                     ABOX_ASSIGN_OR_RETURN(std::string id, SandboxId(svc, req));
                     ABOX_ASSIGN_OR_RETURN(store::EgressRequest r, svc->egress->Deny(id, name));
                     return api::ToJson(api::EgressDecision{.request = RequestOf(r)});
                   }));
  ABOX_RETURN_IF_ERROR(AddJsonRoute(
      router, svc, "POST", "/v1/egress/ignore",
      [svc](Request& req) -> absl::StatusOr<nlohmann::json> {
        ABOX_RETURN_IF_ERROR(CheckQuery(req, {}));
        ABOX_ASSIGN_OR_RETURN(std::string name, DecodeName(req, nullptr));
        ABOX_ASSIGN_OR_RETURN(int64_t changed, svc->egress->Ignore(name));
        return api::ToJson(api::EgressIgnored{.name = name, .requests_changed = changed});
      }));
  return absl::OkStatus();
}

}  // namespace abox::daemon
