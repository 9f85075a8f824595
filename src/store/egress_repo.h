// The egress tables: the global and per-sandbox policies, the connection and DNS logs (bounded
// per sandbox) and the "ask to allow" requests with the names taken out of the review queue.
//
// The store keeps rule texts and names as the daemon gives them (src/net validates and
// normalises them); it does not depend on src/net.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/store/column_codec.h"
#include "src/store/database.h"
#include "src/store/retention_counters.h"

namespace abox::store {

// One scope's policy. For the global scope `mode` is always set (default "allowlist").
struct EgressPolicyRecord {
  std::optional<std::string> mode;       // "none" | "allowlist" | "open"; nullopt: the global mode
  std::vector<std::string> allow;        // rule texts, in order
  std::optional<absl::Time> updated_at;  // nullopt: never set (the defaults)

  friend bool operator==(const EgressPolicyRecord&, const EgressPolicyRecord&) = default;
};

// One guest TCP connection (net::ConnectionRecord as stored).
struct EgressConnectionRow {
  int64_t seq = 0;  // set by the store
  std::string sandbox_id;
  absl::Time time;
  std::string kind;  // unknown | tls | http | connect | tcp
  std::string name;
  std::string address;
  int port = 0;
  std::string verdict;  // allowed | denied | error
  std::string reason;
  std::string matched_rule;
  bool via_override = false;
  int64_t bytes_up = 0;
  int64_t bytes_down = 0;
  int64_t duration_ms = 0;

  friend bool operator==(const EgressConnectionRow&, const EgressConnectionRow&) = default;
};

// One guest DNS query (net::DnsRecord as stored).
struct EgressDnsRow {
  int64_t seq = 0;  // set by the store
  std::string sandbox_id;
  absl::Time time;
  std::string name;
  int qtype = 0;
  std::string verdict;  // allowed | denied | error
  int rcode = 0;
  std::vector<std::string> answers;
  std::string reason;
  std::string matched_rule;
  bool via_override = false;

  friend bool operator==(const EgressDnsRow&, const EgressDnsRow&) = default;
};

enum class EgressRequestState { kPending, kApprovedOnce, kApproved, kDenied, kIgnored };
// "pending", "approved_once", "approved", "denied", "ignored".
[[nodiscard]] const char* EgressRequestStateName(EgressRequestState state);
[[nodiscard]] absl::StatusOr<EgressRequestState> ParseEgressRequestState(absl::string_view text);

// A name the policy refused for a sandbox, and what a person decided about it.
struct EgressRequest {
  std::string sandbox_id;
  std::string name;
  int port = 0;       // the last port it was refused on; 0 when only a DNS lookup was
  int64_t count = 0;  // refusals so far
  absl::Time first_seen;
  absl::Time last_seen;
  EgressRequestState state = EgressRequestState::kPending;
  std::string reason;      // the last refusal's reason
  int once_port = 0;       // kApprovedOnce: the port the one connection may use
  bool once_left = false;  // kApprovedOnce: the approval is not used yet

  friend bool operator==(const EgressRequest&, const EgressRequest&) = default;
};

struct EgressRequestFilter {
  std::optional<std::string> sandbox_id;
  std::vector<EgressRequestState> states;  // empty: any
};

// What RecordDenial did.
struct DenialOutcome {
  EgressRequest request;       // the row after the update
  bool newly_pending = false;  // the name (re-)entered the review queue with this refusal
  // The sandbox's queue was full: the name was not queued (the request above is not stored)
  // and the sandbox's queue_dropped counter grew. The name stays denied.
  bool dropped = false;
};

struct EgressRepoOptions {
  // Log rows kept per sandbox and per log (connections, DNS); older ones are pruned on insert.
  int64_t log_rows_per_sandbox = 10000;
  // Pending names per sandbox in the review queue; a new name beyond it is counted in the
  // sandbox's queue_dropped, not stored (a guest can make up names without end).
  int64_t pending_per_sandbox = 1000;
};

// Typed access to the egress tables. Does not own the Database, which must outlive it. Times
// come from the injected clock. Thread-safe; each method holds the connection for its duration.
class EgressRepo final {
 public:
  explicit EgressRepo(Database& db, Clock clock = absl::Now, EgressRepoOptions options = {});

  // The global policy; {"allowlist", []} (allow nothing) when never set.
  [[nodiscard]] absl::StatusOr<EgressPolicyRecord> GetGlobalPolicy();
  // Replaces it. The global mode is required (kInvalidArgument without one).
  [[nodiscard]] absl::Status PutGlobalPolicy(const EgressPolicyRecord& policy);
  // A sandbox's own policy; {nullopt, []} (inherit everything) when never set.
  [[nodiscard]] absl::StatusOr<EgressPolicyRecord> GetSandboxPolicy(absl::string_view sandbox_id);
  // Replaces it; kNotFound for an unknown sandbox.
  [[nodiscard]] absl::Status PutSandboxPolicy(absl::string_view sandbox_id,
                                              const EgressPolicyRecord& policy);

  // Appends a log row (seq assigned) and prunes the sandbox's oldest rows beyond the cap,
  // counting them in the sandbox's connections_pruned / dns_pruned. Other sandboxes' rows are
  // never touched.
  [[nodiscard]] absl::Status AddConnection(const EgressConnectionRow& row);
  [[nodiscard]] absl::Status AddDns(const EgressDnsRow& row);
  // A sandbox's log rows, newest first, at most `limit` (>= 1).
  [[nodiscard]] absl::StatusOr<std::vector<EgressConnectionRow>> ListConnections(
      absl::string_view sandbox_id, int limit);
  [[nodiscard]] absl::StatusOr<std::vector<EgressDnsRow>> ListDns(absl::string_view sandbox_id,
                                                                  int limit);

  // The policy refused `name` for the sandbox on `port` (0: a DNS lookup). A new name becomes
  // pending (ignored when the name is on the ignore list); a pending or decided one counts the
  // refusal. An approval that no longer holds (approved, or approved once and used) goes back
  // to pending: the refusal is a new question. A new name finding the sandbox's queue at
  // pending_per_sandbox is not stored (DenialOutcome::dropped).
  [[nodiscard]] absl::StatusOr<DenialOutcome> RecordDenial(absl::string_view sandbox_id,
                                                           absl::string_view name, int port,
                                                           absl::string_view reason);
  // Requests matching `filter`, most recently seen first.
  [[nodiscard]] absl::StatusOr<std::vector<EgressRequest>> ListRequests(
      const EgressRequestFilter& filter);
  // Records a decision about `name` (the row is created when the name was never refused).
  // kApprovedOnce makes one connection on `once_port` possible (see TakeOnce).
  [[nodiscard]] absl::StatusOr<EgressRequest> Decide(absl::string_view sandbox_id,
                                                     absl::string_view name,
                                                     EgressRequestState state, int once_port = 0);
  // Uses a one-time approval of `name` on `port`: true (and used up) when there was one.
  [[nodiscard]] absl::StatusOr<bool> TakeOnce(absl::string_view sandbox_id, absl::string_view name,
                                              int port);
  // Whether an unused one-time approval of `name` exists (on any port).
  [[nodiscard]] absl::StatusOr<bool> HasOnce(absl::string_view sandbox_id, absl::string_view name);
  // Puts `name` on the ignore list: its pending requests in every sandbox leave the queue
  // (state ignored) and later refusals are counted without asking. Decided requests keep
  // their decision. Returns the rows changed.
  [[nodiscard]] absl::StatusOr<int64_t> Ignore(absl::string_view name);
  [[nodiscard]] absl::StatusOr<bool> IsIgnored(absl::string_view name);

  // What the sandbox lost to its caps (its events' count included).
  [[nodiscard]] absl::StatusOr<RetentionCounters> Counters(absl::string_view sandbox_id);
  // Sandboxes whose queue was full for some names, with how many were not queued.
  [[nodiscard]] absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> QueueDropped();
  [[nodiscard]] const EgressRepoOptions& options() const { return options_; }

 private:
  Database* db_;
  Clock clock_;
  EgressRepoOptions options_;
};

}  // namespace abox::store
