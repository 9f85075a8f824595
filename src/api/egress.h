// The egress routes' bodies and answers: policies (/v1/egress/policy and a sandbox's, PUT to
// replace, POST .../rules to add or remove), a sandbox's connection and DNS log, the review
// queue and the decisions on it (approve, deny, ignore).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace abox::api {

// A mode and its allow rules (the rule texts as the daemon normalised them).
struct EgressRules {
  std::optional<std::string> mode;  // none | allowlist | open; null: the global mode
  std::vector<std::string> allow;

  friend bool operator==(const EgressRules&, const EgressRules&) = default;
};

// The answer of the policy and rules routes.
struct EgressPolicy {
  EgressRules rules;
  std::string sandbox;                   // a sandbox's policy: its id; empty for the global one
  std::optional<EgressRules> effective;  // a sandbox's: the global and its own together
  std::vector<std::string> warnings;     // e.g. a loopback rule was admitted (sent when any)

  friend bool operator==(const EgressPolicy&, const EgressPolicy&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const EgressPolicy& policy);
[[nodiscard]] absl::StatusOr<EgressPolicy> DecodeEgressPolicy(const nlohmann::json& value);

// PUT .../policy: the replacement policy.
struct EgressPolicyUpdate {
  EgressRules rules;
  bool allow_loopback = false;  // a person's choice to let loopback address rules in

  friend bool operator==(const EgressPolicyUpdate&, const EgressPolicyUpdate&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const EgressPolicyUpdate& update);
[[nodiscard]] absl::StatusOr<EgressPolicyUpdate> DecodeEgressPolicyUpdate(absl::string_view body);

// POST .../rules: rules to add and/or remove (at least one).
struct EgressRuleChange {
  std::vector<std::string> add;
  std::vector<std::string> remove;
  bool allow_loopback = false;

  friend bool operator==(const EgressRuleChange&, const EgressRuleChange&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const EgressRuleChange& change);
[[nodiscard]] absl::StatusOr<EgressRuleChange> DecodeEgressRuleChange(absl::string_view body);

// POST .../approve, .../deny and /v1/egress/ignore: {"name": ..., "once": bool (approve only)}.
struct EgressName {
  std::string name;
  std::optional<bool> once;

  friend bool operator==(const EgressName&, const EgressName&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const EgressName& name);
// `with_once`: whether "once" is a field of this route's body.
[[nodiscard]] absl::StatusOr<EgressName> DecodeEgressName(absl::string_view body, bool with_once);

// A name the policy refused, in the review queue.
struct EgressRequest {
  std::string sandbox;
  std::string name;
  int64_t port = 0;  // 0: only a DNS lookup was refused
  int64_t count = 0;
  std::optional<absl::Time> first_seen;
  std::optional<absl::Time> last_seen;
  std::string state;  // pending | approved_once | approved | denied | ignored
  std::string reason;
  // approved_once only: the port the one connection may use, and whether it was used.
  std::optional<int64_t> once_port;
  bool once_used = false;

  friend bool operator==(const EgressRequest&, const EgressRequest&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const EgressRequest& request);

// GET /v1/egress/queue.
struct EgressQueue {
  struct Full {
    std::string sandbox;
    int64_t dropped = 0;  // refused names not queued

    friend bool operator==(const Full&, const Full&) = default;
  };
  std::vector<EgressRequest> requests;
  int64_t queue_cap = 0;
  std::vector<Full> queue_full;

  friend bool operator==(const EgressQueue&, const EgressQueue&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const EgressQueue& queue);
[[nodiscard]] absl::StatusOr<EgressQueue> DecodeEgressQueue(const nlohmann::json& value);

// The answer of approve ({"request", "rule"?, "note"?}) and deny ({"request"}).
struct EgressDecision {
  EgressRequest request;
  std::string rule;  // approve --always: the rule added
  std::string note;  // e.g. the guest asked for another port than the one approved

  friend bool operator==(const EgressDecision&, const EgressDecision&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const EgressDecision& decision);
[[nodiscard]] absl::StatusOr<EgressDecision> DecodeEgressDecision(const nlohmann::json& value);

// POST /v1/sandboxes/{id}/egress/ask: an agent asks for a name, with its reason for the person.
inline constexpr size_t kMaxAskReasonBytes = 500;
struct EgressAsk {
  std::string name;    // NAME, NAME:PORT or ADDRESS:PORT
  std::string reason;  // shown to the person in the review queue
  friend bool operator==(const EgressAsk&, const EgressAsk&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const EgressAsk& ask);
[[nodiscard]] absl::StatusOr<EgressAsk> DecodeEgressAsk(absl::string_view body);

// Its answer: the request as it stands (pending: waiting for the person; approved /
// approved_once: allowed; denied / ignored: a decision the person made before).
struct EgressAskAnswer {
  EgressRequest request;
  bool allowed = false;     // the sandbox's policy already allows it: nothing was queued
  bool queue_full = false;  // the sandbox's queue is full: nothing was queued
  friend bool operator==(const EgressAskAnswer&, const EgressAskAnswer&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const EgressAskAnswer& answer);
[[nodiscard]] absl::StatusOr<EgressAskAnswer> DecodeEgressAskAnswer(const nlohmann::json& value);

// The answer of /v1/egress/ignore.
struct EgressIgnored {
  std::string name;
  int64_t requests_changed = 0;

  friend bool operator==(const EgressIgnored&, const EgressIgnored&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const EgressIgnored& ignored);
[[nodiscard]] absl::StatusOr<EgressIgnored> DecodeEgressIgnored(const nlohmann::json& value);

// A connection of a sandbox, as the proxy decided it.
struct EgressConnection {
  std::optional<absl::Time> time;
  std::string kind;                 // unknown | tls | http | connect | tcp
  std::optional<std::string> name;  // TLS SNI or HTTP Host ("" when none); always sent
  std::string address;
  int64_t port = 0;
  std::string verdict;  // allowed | denied | error
  std::string reason;
  std::string matched_rule;
  bool via_override = false;
  int64_t bytes_up = 0;
  int64_t bytes_down = 0;
  int64_t duration_ms = 0;

  friend bool operator==(const EgressConnection&, const EgressConnection&) = default;
};

// A DNS lookup of a sandbox.
struct EgressLookup {
  std::optional<absl::Time> time;
  std::optional<std::string> name;  // the question; always sent
  int64_t qtype = 0;
  std::string verdict;
  int64_t rcode = 0;
  std::vector<std::string> answers;
  std::string reason;
  std::string matched_rule;
  bool via_override = false;

  friend bool operator==(const EgressLookup&, const EgressLookup&) = default;
};

// GET .../egress/log.
struct EgressLog {
  // What the sandbox lost to its caps.
  struct Dropped {
    int64_t queue = 0;
    int64_t connections = 0;
    int64_t dns = 0;
    int64_t events = 0;

    friend bool operator==(const Dropped&, const Dropped&) = default;
  };
  std::string sandbox;
  std::vector<EgressConnection> connections;
  std::vector<EgressLookup> dns;
  Dropped dropped;

  friend bool operator==(const EgressLog&, const EgressLog&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const EgressLog& log);
[[nodiscard]] absl::StatusOr<EgressLog> DecodeEgressLog(const nlohmann::json& value);

}  // namespace abox::api
