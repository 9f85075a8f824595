#include "src/api/egress.h"

#include <utility>

#include "src/api/errors.h"
#include "src/api/json_body.h"
#include "src/api/wire.h"
#include "src/base/status_macros.h"

namespace abox::api {
namespace {

nlohmann::json RulesJson(const EgressRules& r) {
  return {{"mode", r.mode ? nlohmann::json(*r.mode) : nlohmann::json(nullptr)}, {"allow", r.allow}};
}

void ReadRules(AnswerReader& r, EgressRules& rules) {
  r.String("mode", &rules.mode);
  r.StringArray("allow", &rules.allow);
}

void ReadRequest(AnswerReader& r, EgressRequest& q) {
  r.String("sandbox", &q.sandbox);
  r.String("name", &q.name);
  r.Int("port", &q.port);
  r.Int("count", &q.count);
  r.Time("first_seen", &q.first_seen);
  r.Time("last_seen", &q.last_seen);
  r.String("state", &q.state);
  r.String("reason", &q.reason);
  r.Int("once_port", &q.once_port);
  r.Bool("once_used", &q.once_used);
}

absl::StatusOr<nlohmann::json> Body(absl::string_view body) {
  return ParseObject(std::string_view(body.data(), body.size()));
}

}  // namespace

nlohmann::json ToJson(const EgressPolicy& p) {
  nlohmann::json j = RulesJson(p.rules);
  if (!p.sandbox.empty()) {
    j["sandbox"] = p.sandbox;
  }
  if (p.effective) {
    j["effective"] = RulesJson(*p.effective);
  }
  if (!p.warnings.empty()) {
    j["warnings"] = p.warnings;
  }
  return j;
}

absl::StatusOr<EgressPolicy> DecodeEgressPolicy(const nlohmann::json& value) {
  AnswerReader r(value);
  EgressPolicy p;
  ReadRules(r, p.rules);
  r.String("sandbox", &p.sandbox);
  r.Object("effective", [&](AnswerReader& e) {
    EgressRules effective;
    ReadRules(e, effective);
    p.effective = std::move(effective);
  });
  r.StringArray("warnings", &p.warnings);
  ABOX_RETURN_IF_ERROR(r.status());
  return p;
}

nlohmann::json ToJson(const EgressPolicyUpdate& u) {
  nlohmann::json j = RulesJson(u.rules);
  if (u.allow_loopback) {
    j["allow_loopback"] = true;
  }
  return j;
}

absl::StatusOr<EgressPolicyUpdate> DecodeEgressPolicyUpdate(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json object, Body(body));
  Reader r(object);
  EgressPolicyUpdate u;
  r.OptionalString("mode", &u.rules.mode, 16);
  r.OptionalStringArray("allow", &u.rules.allow, 1024);
  r.OptionalBool("allow_loopback", &u.allow_loopback);
  ABOX_RETURN_IF_ERROR(r.Finish());
  return u;
}

nlohmann::json ToJson(const EgressRuleChange& c) {
  nlohmann::json j = nlohmann::json::object();
  if (!c.add.empty()) {
    j["add"] = c.add;
  }
  if (!c.remove.empty()) {
    j["remove"] = c.remove;
  }
  if (c.allow_loopback) {
    j["allow_loopback"] = true;
  }
  return j;
}

absl::StatusOr<EgressRuleChange> DecodeEgressRuleChange(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json object, Body(body));
  Reader r(object);
  EgressRuleChange c;
  r.OptionalStringArray("add", &c.add, 1024);
  r.OptionalStringArray("remove", &c.remove, 1024);
  r.OptionalBool("allow_loopback", &c.allow_loopback);
  ABOX_RETURN_IF_ERROR(r.Finish());
  if (c.add.empty() && c.remove.empty()) {
    return FieldError("add", "give rules to add and/or remove");
  }
  return c;
}

nlohmann::json ToJson(const EgressName& n) {
  nlohmann::json j = {{"name", n.name}};
  if (n.once) {
    j["once"] = *n.once;
  }
  return j;
}

absl::StatusOr<EgressName> DecodeEgressName(absl::string_view body, bool with_once) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json object, Body(body));
  Reader r(object);
  EgressName n;
  r.RequiredString("name", &n.name, 300);
  if (with_once) {
    r.OptionalBool("once", &n.once);
  }
  ABOX_RETURN_IF_ERROR(r.Finish());
  return n;
}

nlohmann::json ToJson(const EgressRequest& q) {
  nlohmann::json j = {{"sandbox", q.sandbox}, {"name", q.name},   {"port", q.port},
                      {"count", q.count},     {"state", q.state}, {"reason", q.reason}};
  PutApiTime(j, "first_seen", q.first_seen);
  PutApiTime(j, "last_seen", q.last_seen);
  if (q.once_port) {
    j["once_port"] = *q.once_port;
    j["once_used"] = q.once_used;
  }
  return j;
}

nlohmann::json ToJson(const EgressQueue& queue) {
  nlohmann::json requests = nlohmann::json::array();
  for (const EgressRequest& q : queue.requests) {
    requests.push_back(ToJson(q));
  }
  nlohmann::json full = nlohmann::json::array();
  for (const EgressQueue::Full& f : queue.queue_full) {
    full.push_back({{"sandbox", f.sandbox}, {"dropped", f.dropped}});
  }
  return {{"requests", std::move(requests)},
          {"queue_cap", queue.queue_cap},
          {"queue_full", std::move(full)}};
}

absl::StatusOr<EgressQueue> DecodeEgressQueue(const nlohmann::json& value) {
  AnswerReader r(value);
  EgressQueue queue;
  r.ObjectArray("requests", [&](AnswerReader& item) {
    EgressRequest q;
    ReadRequest(item, q);
    queue.requests.push_back(std::move(q));
  });
  r.Int("queue_cap", &queue.queue_cap);
  r.ObjectArray("queue_full", [&](AnswerReader& item) {
    EgressQueue::Full f;
    item.String("sandbox", &f.sandbox);
    item.Int("dropped", &f.dropped);
    queue.queue_full.push_back(std::move(f));
  });
  ABOX_RETURN_IF_ERROR(r.status());
  return queue;
}

nlohmann::json ToJson(const EgressDecision& d) {
  nlohmann::json j = {{"request", ToJson(d.request)}};
  if (!d.rule.empty()) {
    j["rule"] = d.rule;
  }
  if (!d.note.empty()) {
    j["note"] = d.note;
  }
  return j;
}

absl::StatusOr<EgressDecision> DecodeEgressDecision(const nlohmann::json& value) {
  AnswerReader r(value);
  EgressDecision d;
  r.Object("request", [&](AnswerReader& q) { ReadRequest(q, d.request); });
  r.String("rule", &d.rule);
  r.String("note", &d.note);
  ABOX_RETURN_IF_ERROR(r.status());
  return d;
}

nlohmann::json ToJson(const EgressAsk& a) { return {{"name", a.name}, {"reason", a.reason}}; }

absl::StatusOr<EgressAsk> DecodeEgressAsk(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json object, Body(body));
  Reader r(object);
  EgressAsk a;
  r.RequiredString("name", &a.name, 300);
  r.RequiredString("reason", &a.reason, kMaxAskReasonBytes);
  ABOX_RETURN_IF_ERROR(r.Finish());
  return a;
}

nlohmann::json ToJson(const EgressAskAnswer& a) {
  return {{"request", ToJson(a.request)}, {"allowed", a.allowed}, {"queue_full", a.queue_full}};
}

absl::StatusOr<EgressAskAnswer> DecodeEgressAskAnswer(const nlohmann::json& value) {
  AnswerReader r(value);
  EgressAskAnswer a;
  r.Object("request", [&](AnswerReader& q) { ReadRequest(q, a.request); });
  r.Bool("allowed", &a.allowed);
  r.Bool("queue_full", &a.queue_full);
  ABOX_RETURN_IF_ERROR(r.status());
  return a;
}

nlohmann::json ToJson(const EgressIgnored& i) {
  return {{"name", i.name}, {"requests_changed", i.requests_changed}};
}

absl::StatusOr<EgressIgnored> DecodeEgressIgnored(const nlohmann::json& value) {
  AnswerReader r(value);
  EgressIgnored i;
  r.String("name", &i.name);
  r.Int("requests_changed", &i.requests_changed);
  ABOX_RETURN_IF_ERROR(r.status());
  return i;
}

nlohmann::json ToJson(const EgressLog& log) {
  nlohmann::json connections = nlohmann::json::array();
  for (const EgressConnection& c : log.connections) {
    nlohmann::json j = {{"kind", c.kind},
                        {"address", c.address},
                        {"port", c.port},
                        {"verdict", c.verdict},
                        {"reason", c.reason},
                        {"matched_rule", c.matched_rule},
                        {"via_override", c.via_override},
                        {"bytes_up", c.bytes_up},
                        {"bytes_down", c.bytes_down},
                        {"duration_ms", c.duration_ms}};
    PutApiTime(j, "time", c.time);
    if (c.name) {
      j["name"] = *c.name;
    }
    connections.push_back(std::move(j));
  }
  nlohmann::json dns = nlohmann::json::array();
  for (const EgressLookup& d : log.dns) {
    nlohmann::json j = {{"qtype", d.qtype},
                        {"verdict", d.verdict},
                        {"rcode", d.rcode},
                        {"answers", d.answers},
                        {"reason", d.reason},
                        {"matched_rule", d.matched_rule},
                        {"via_override", d.via_override}};
    PutApiTime(j, "time", d.time);
    if (d.name) {
      j["name"] = *d.name;
    }
    dns.push_back(std::move(j));
  }
  return {{"sandbox", log.sandbox},
          {"connections", std::move(connections)},
          {"dns", std::move(dns)},
          {"dropped",
           {{"queue", log.dropped.queue},
            {"connections", log.dropped.connections},
            {"dns", log.dropped.dns},
            {"events", log.dropped.events}}}};
}

absl::StatusOr<EgressLog> DecodeEgressLog(const nlohmann::json& value) {
  AnswerReader r(value);
  EgressLog log;
  r.String("sandbox", &log.sandbox);
  r.ObjectArray("connections", [&](AnswerReader& item) {
    EgressConnection c;
    item.Time("time", &c.time);
    item.String("kind", &c.kind);
    item.String("name", &c.name);
    item.String("address", &c.address);
    item.Int("port", &c.port);
    item.String("verdict", &c.verdict);
    item.String("reason", &c.reason);
    item.String("matched_rule", &c.matched_rule);
    item.Bool("via_override", &c.via_override);
    item.Int("bytes_up", &c.bytes_up);
    item.Int("bytes_down", &c.bytes_down);
    item.Int("duration_ms", &c.duration_ms);
    log.connections.push_back(std::move(c));
  });
  r.ObjectArray("dns", [&](AnswerReader& item) {
    EgressLookup d;
    item.Time("time", &d.time);
    item.String("name", &d.name);
    item.Int("qtype", &d.qtype);
    item.String("verdict", &d.verdict);
    item.Int("rcode", &d.rcode);
    item.StringArray("answers", &d.answers);
    item.String("reason", &d.reason);
    item.String("matched_rule", &d.matched_rule);
    item.Bool("via_override", &d.via_override);
    log.dns.push_back(std::move(d));
  });
  r.Object("dropped", [&](AnswerReader& d) {
    d.Int("queue", &log.dropped.queue);
    d.Int("connections", &log.dropped.connections);
    d.Int("dns", &log.dropped.dns);
    d.Int("events", &log.dropped.events);
  });
  ABOX_RETURN_IF_ERROR(r.status());
  return log;
}

}  // namespace abox::api
