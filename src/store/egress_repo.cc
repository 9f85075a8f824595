#include "src/store/egress_repo.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/status_macros.h"
#include "src/store/retention_counters.h"

namespace abox::store {
namespace {

constexpr std::array<const char*, 5> kStateNames = {"pending", "approved_once", "approved",
                                                    "denied", "ignored"};

constexpr char kConnectionColumns[] =
    "seq, sandbox_id, time, kind, name, address, port, verdict, reason, matched_rule, "
    "via_override, bytes_up, bytes_down, duration_ms";
constexpr char kDnsColumns[] =
    "seq, sandbox_id, time, name, qtype, verdict, rcode, answers, reason, matched_rule, "
    "via_override";
constexpr char kRequestColumns[] =
    "sandbox_id, name, port, count, first_seen, last_seen, state, reason, once_port, once_left";

absl::Status CheckMode(const std::optional<std::string>& mode) {
  if (mode && *mode != "none" && *mode != "allowlist" && *mode != "open") {
    return absl::InvalidArgumentError(
        absl::StrCat("egress mode '", *mode, "' is not none, allowlist or open"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> SandboxExists(Connection& connection, absl::string_view id) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare("SELECT 1 FROM sandboxes WHERE id = ?"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, id));
  return stmt.Step();
}

absl::StatusOr<EgressRequest> ReadRequest(const Statement& stmt) {
  EgressRequest r;
  r.sandbox_id = stmt.ColumnText(0);
  r.name = stmt.ColumnText(1);
  r.port = static_cast<int>(stmt.ColumnInt64(2));
  r.count = stmt.ColumnInt64(3);
  r.first_seen = FromMillis(stmt.ColumnInt64(4));
  r.last_seen = FromMillis(stmt.ColumnInt64(5));
  ABOX_ASSIGN_OR_RETURN(r.state, ParseEgressRequestState(stmt.ColumnText(6)));
  r.reason = stmt.ColumnText(7);
  r.once_port = static_cast<int>(stmt.ColumnInt64(8));
  r.once_left = stmt.ColumnBool(9);
  return r;
}

absl::StatusOr<std::optional<EgressRequest>> FindRequest(Connection& connection,
                                                         absl::string_view sandbox_id,
                                                         absl::string_view name) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare(absl::StrCat("SELECT ", kRequestColumns,
                                                        " FROM egress_requests "
                                                        "WHERE sandbox_id = ? AND name = ?")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  ABOX_RETURN_IF_ERROR(stmt.BindText(2, name));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return std::nullopt;
  }
  return ReadRequest(stmt);
}

absl::Status WriteRequest(Connection& connection, const EgressRequest& r) {
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare(absl::StrCat("INSERT OR REPLACE INTO egress_requests (", kRequestColumns,
                                      ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, r.sandbox_id));
  ABOX_RETURN_IF_ERROR(stmt.BindText(2, r.name));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(3, r.port));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(4, r.count));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(5, ToMillis(r.first_seen)));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(6, ToMillis(r.last_seen)));
  ABOX_RETURN_IF_ERROR(stmt.BindText(7, EgressRequestStateName(r.state)));
  ABOX_RETURN_IF_ERROR(stmt.BindText(8, r.reason));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(9, r.once_port));
  ABOX_RETURN_IF_ERROR(stmt.BindBool(10, r.once_left));
  return stmt.Run();
}

absl::StatusOr<bool> Ignored(Connection& connection, absl::string_view name) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("SELECT 1 FROM egress_ignored WHERE name = ?"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, name));
  return stmt.Step();
}

absl::StatusOr<int64_t> PendingCount(Connection& connection, absl::string_view sandbox_id) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("SELECT count(*) FROM egress_requests "
                                           "WHERE sandbox_id = ? AND state = 'pending'"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.ColumnInt64(0) : 0;
}

absl::Status CheckLimit(int limit) {
  if (limit < 1) {
    return absl::InvalidArgumentError(absl::StrCat("egress log limit ", limit, " is below 1"));
  }
  return absl::OkStatus();
}

}  // namespace

const char* EgressRequestStateName(EgressRequestState state) {
  return kStateNames[static_cast<size_t>(state)];
}

absl::StatusOr<EgressRequestState> ParseEgressRequestState(absl::string_view text) {
  for (size_t i = 0; i < kStateNames.size(); ++i) {
    if (text == kStateNames[i]) {
      return static_cast<EgressRequestState>(i);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown egress request state '", text, "' (",
                                                 absl::StrJoin(kStateNames, ", "), ")"));
}

EgressRepo::EgressRepo(Database& db, Clock clock, EgressRepoOptions options)
    : db_(&db), clock_(std::move(clock)), options_(options) {
  options_.log_rows_per_sandbox = std::max<int64_t>(options_.log_rows_per_sandbox, 1);
  options_.pending_per_sandbox = std::max<int64_t>(options_.pending_per_sandbox, 1);
}

absl::StatusOr<EgressPolicyRecord> EgressRepo::GetGlobalPolicy() {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare("SELECT mode, allow, updated_at FROM egress_global_policy WHERE id = 1"));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  EgressPolicyRecord policy;
  if (!row) {
    policy.mode = "allowlist";
    return policy;
  }
  policy.mode = stmt.ColumnText(0);
  ABOX_ASSIGN_OR_RETURN(policy.allow,
                        StringListFromJson(stmt.ColumnText(1), "egress_global_policy.allow"));
  policy.updated_at = FromMillis(stmt.ColumnInt64(2));
  return policy;
}

absl::Status EgressRepo::PutGlobalPolicy(const EgressPolicyRecord& policy) {
  if (!policy.mode) {
    return absl::InvalidArgumentError("the global egress policy needs a mode");
  }
  ABOX_RETURN_IF_ERROR(CheckMode(policy.mode));
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("INSERT OR REPLACE INTO egress_global_policy "
                                           "(id, mode, allow, updated_at) VALUES (1, ?, ?, ?)"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, *policy.mode));
  ABOX_RETURN_IF_ERROR(stmt.BindText(2, StringListToJson(policy.allow)));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(3, ToMillis(clock_())));
  return stmt.Run();
}

absl::StatusOr<EgressPolicyRecord> EgressRepo::GetSandboxPolicy(absl::string_view sandbox_id) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("SELECT mode, allow, updated_at FROM "
                                           "egress_sandbox_policies WHERE sandbox_id = ?"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  EgressPolicyRecord policy;
  if (!row) {
    return policy;
  }
  if (!stmt.ColumnIsNull(0)) {
    policy.mode = stmt.ColumnText(0);
  }
  ABOX_ASSIGN_OR_RETURN(policy.allow,
                        StringListFromJson(stmt.ColumnText(1), "egress_sandbox_policies.allow"));
  policy.updated_at = FromMillis(stmt.ColumnInt64(2));
  return policy;
}

absl::Status EgressRepo::PutSandboxPolicy(absl::string_view sandbox_id,
                                          const EgressPolicyRecord& policy) {
  ABOX_RETURN_IF_ERROR(CheckMode(policy.mode));
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(connection));
  ABOX_ASSIGN_OR_RETURN(bool exists, SandboxExists(connection, sandbox_id));
  if (!exists) {
    return absl::NotFoundError(absl::StrCat("no sandbox '", sandbox_id, "'"));
  }
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("INSERT OR REPLACE INTO egress_sandbox_policies "
                                           "(sandbox_id, mode, allow, updated_at) "
                                           "VALUES (?, ?, ?, ?)"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  if (policy.mode) {
    ABOX_RETURN_IF_ERROR(stmt.BindText(2, *policy.mode));
  } else {
    ABOX_RETURN_IF_ERROR(stmt.BindNull(2));
  }
  ABOX_RETURN_IF_ERROR(stmt.BindText(3, StringListToJson(policy.allow)));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(4, ToMillis(clock_())));
  ABOX_RETURN_IF_ERROR(stmt.Run());
  return transaction.Commit();
}

absl::Status EgressRepo::AddConnection(const EgressConnectionRow& r) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(connection));
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare(
          "INSERT INTO egress_connections (sandbox_id, time, kind, name, address, "
          "port, verdict, reason, matched_rule, via_override, bytes_up, "
          "bytes_down, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, r.sandbox_id));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(2, ToMillis(r.time)));
  ABOX_RETURN_IF_ERROR(stmt.BindText(3, r.kind));
  ABOX_RETURN_IF_ERROR(stmt.BindText(4, r.name));
  ABOX_RETURN_IF_ERROR(stmt.BindText(5, r.address));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(6, r.port));
  ABOX_RETURN_IF_ERROR(stmt.BindText(7, r.verdict));
  ABOX_RETURN_IF_ERROR(stmt.BindText(8, r.reason));
  ABOX_RETURN_IF_ERROR(stmt.BindText(9, r.matched_rule));
  ABOX_RETURN_IF_ERROR(stmt.BindBool(10, r.via_override));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(11, r.bytes_up));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(12, r.bytes_down));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(13, r.duration_ms));
  ABOX_RETURN_IF_ERROR(stmt.Run());
  ABOX_RETURN_IF_ERROR(KeepNewest(connection, RetainedTable::kConnections, r.sandbox_id,
                                  options_.log_rows_per_sandbox)
                           .status());
  return transaction.Commit();
}

absl::Status EgressRepo::AddDns(const EgressDnsRow& r) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(connection));
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare("INSERT INTO egress_dns (sandbox_id, time, name, qtype, verdict, rcode, "
                         "answers, reason, matched_rule, via_override) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, r.sandbox_id));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(2, ToMillis(r.time)));
  ABOX_RETURN_IF_ERROR(stmt.BindText(3, r.name));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(4, r.qtype));
  ABOX_RETURN_IF_ERROR(stmt.BindText(5, r.verdict));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(6, r.rcode));
  ABOX_RETURN_IF_ERROR(stmt.BindText(7, StringListToJson(r.answers)));
  ABOX_RETURN_IF_ERROR(stmt.BindText(8, r.reason));
  ABOX_RETURN_IF_ERROR(stmt.BindText(9, r.matched_rule));
  ABOX_RETURN_IF_ERROR(stmt.BindBool(10, r.via_override));
  ABOX_RETURN_IF_ERROR(stmt.Run());
  ABOX_RETURN_IF_ERROR(
      KeepNewest(connection, RetainedTable::kDns, r.sandbox_id, options_.log_rows_per_sandbox)
          .status());
  return transaction.Commit();
}

absl::StatusOr<std::vector<EgressConnectionRow>> EgressRepo::ListConnections(
    absl::string_view sandbox_id, int limit) {
  ABOX_RETURN_IF_ERROR(CheckLimit(limit));
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt, connection.Prepare(absl::StrCat("SELECT ", kConnectionColumns,
                                                      " FROM egress_connections WHERE "
                                                      "sandbox_id = ? ORDER BY seq DESC LIMIT ?")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(2, limit));
  std::vector<EgressConnectionRow> out;
  for (;;) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return out;
    }
    EgressConnectionRow r;
    r.seq = stmt.ColumnInt64(0);
    r.sandbox_id = stmt.ColumnText(1);
    r.time = FromMillis(stmt.ColumnInt64(2));
    r.kind = stmt.ColumnText(3);
    r.name = stmt.ColumnText(4);
    r.address = stmt.ColumnText(5);
    r.port = static_cast<int>(stmt.ColumnInt64(6));
    r.verdict = stmt.ColumnText(7);
    r.reason = stmt.ColumnText(8);
    r.matched_rule = stmt.ColumnText(9);
    r.via_override = stmt.ColumnBool(10);
    r.bytes_up = stmt.ColumnInt64(11);
    r.bytes_down = stmt.ColumnInt64(12);
    r.duration_ms = stmt.ColumnInt64(13);
    out.push_back(std::move(r));
  }
}

absl::StatusOr<std::vector<EgressDnsRow>> EgressRepo::ListDns(absl::string_view sandbox_id,
                                                              int limit) {
  ABOX_RETURN_IF_ERROR(CheckLimit(limit));
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare(absl::StrCat("SELECT ", kDnsColumns,
                                                        " FROM egress_dns WHERE sandbox_id = ? "
                                                        "ORDER BY seq DESC LIMIT ?")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(2, limit));
  std::vector<EgressDnsRow> out;
  for (;;) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return out;
    }
    EgressDnsRow r;
    r.seq = stmt.ColumnInt64(0);
    r.sandbox_id = stmt.ColumnText(1);
    r.time = FromMillis(stmt.ColumnInt64(2));
    r.name = stmt.ColumnText(3);
    r.qtype = static_cast<int>(stmt.ColumnInt64(4));
    r.verdict = stmt.ColumnText(5);
    r.rcode = static_cast<int>(stmt.ColumnInt64(6));
    ABOX_ASSIGN_OR_RETURN(r.answers, StringListFromJson(stmt.ColumnText(7), "egress_dns.answers"));
    r.reason = stmt.ColumnText(8);
    r.matched_rule = stmt.ColumnText(9);
    r.via_override = stmt.ColumnBool(10);
    out.push_back(std::move(r));
  }
}

absl::StatusOr<DenialOutcome> EgressRepo::RecordDenial(absl::string_view sandbox_id,
                                                       absl::string_view name, int port,
                                                       absl::string_view reason) {
  absl::Time now = FromMillis(ToMillis(clock_()));
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(connection));
  ABOX_ASSIGN_OR_RETURN(std::optional<EgressRequest> existing,
                        FindRequest(connection, sandbox_id, name));
  DenialOutcome out;
  EgressRequest& r = out.request;
  if (existing) {
    r = *std::move(existing);
  } else {
    ABOX_ASSIGN_OR_RETURN(bool sandbox, SandboxExists(connection, sandbox_id));
    if (!sandbox) {
      return absl::NotFoundError(absl::StrCat("no sandbox '", sandbox_id, "'"));
    }
    ABOX_ASSIGN_OR_RETURN(bool ignored, Ignored(connection, name));
    r.sandbox_id = std::string(sandbox_id);
    r.name = std::string(name);
    r.first_seen = now;
    r.state = ignored ? EgressRequestState::kIgnored : EgressRequestState::kPending;
    if (!ignored) {
      ABOX_ASSIGN_OR_RETURN(int64_t pending, PendingCount(connection, sandbox_id));
      if (pending >= options_.pending_per_sandbox) {
        // A guest making up names cannot grow the table: the name stays denied (and logged by
        // the caller), only counted here.
        ABOX_RETURN_IF_ERROR(
            AddToRetentionCounter(connection, sandbox_id, RetentionCounter::kQueueDropped, 1));
        ABOX_RETURN_IF_ERROR(transaction.Commit());
        r.count = 1;
        r.last_seen = now;
        r.port = port;
        r.reason = std::string(reason);
        out.dropped = true;
        return out;
      }
    }
    out.newly_pending = !ignored;
  }
  bool approval_spent = r.state == EgressRequestState::kApproved ||
                        (r.state == EgressRequestState::kApprovedOnce && !r.once_left);
  if (existing && approval_spent) {
    r.state = EgressRequestState::kPending;
    r.once_port = 0;
    out.newly_pending = true;
  }
  ++r.count;
  r.last_seen = now;
  if (port != 0 || r.port == 0) {
    r.port = port;
  }
  r.reason = std::string(reason);
  ABOX_RETURN_IF_ERROR(WriteRequest(connection, r));
  ABOX_RETURN_IF_ERROR(transaction.Commit());
  return out;
}

absl::StatusOr<std::vector<EgressRequest>> EgressRepo::ListRequests(
    const EgressRequestFilter& filter) {
  std::string sql = absl::StrCat("SELECT ", kRequestColumns, " FROM egress_requests WHERE 1");
  if (filter.sandbox_id) {
    absl::StrAppend(&sql, " AND sandbox_id = :sandbox");
  }
  if (!filter.states.empty()) {
    std::vector<std::string> names;
    for (EgressRequestState s : filter.states) {
      // Names from our own table, not from input.
      names.push_back(absl::StrCat("'", EgressRequestStateName(s), "'"));
    }
    absl::StrAppend(&sql, " AND state IN (", absl::StrJoin(names, ", "), ")");
  }
  absl::StrAppend(&sql, " ORDER BY last_seen DESC, name");
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare(sql));
  if (filter.sandbox_id) {
    ABOX_RETURN_IF_ERROR(stmt.BindText(":sandbox", *filter.sandbox_id));
  }
  std::vector<EgressRequest> out;
  for (;;) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return out;
    }
    ABOX_ASSIGN_OR_RETURN(EgressRequest r, ReadRequest(stmt));
    out.push_back(std::move(r));
  }
}

absl::StatusOr<EgressRequest> EgressRepo::Decide(absl::string_view sandbox_id,
                                                 absl::string_view name, EgressRequestState state,
                                                 int once_port) {
  absl::Time now = FromMillis(ToMillis(clock_()));
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(connection));
  ABOX_ASSIGN_OR_RETURN(std::optional<EgressRequest> existing,
                        FindRequest(connection, sandbox_id, name));
  EgressRequest r;
  if (existing) {
    r = *std::move(existing);
  } else {
    ABOX_ASSIGN_OR_RETURN(bool sandbox, SandboxExists(connection, sandbox_id));
    if (!sandbox) {
      return absl::NotFoundError(absl::StrCat("no sandbox '", sandbox_id, "'"));
    }
    r.sandbox_id = std::string(sandbox_id);
    r.name = std::string(name);
    r.first_seen = now;
    r.last_seen = now;
  }
  r.state = state;
  r.once_left = state == EgressRequestState::kApprovedOnce;
  r.once_port = r.once_left ? once_port : 0;
  ABOX_RETURN_IF_ERROR(WriteRequest(connection, r));
  ABOX_RETURN_IF_ERROR(transaction.Commit());
  return r;
}

absl::StatusOr<bool> EgressRepo::TakeOnce(absl::string_view sandbox_id, absl::string_view name,
                                          int port) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("UPDATE egress_requests SET once_left = 0 "
                                           "WHERE sandbox_id = ? AND name = ? AND "
                                           "state = 'approved_once' AND once_left = 1 AND "
                                           "once_port = ?"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  ABOX_RETURN_IF_ERROR(stmt.BindText(2, name));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(3, port));
  ABOX_RETURN_IF_ERROR(stmt.Run());
  return connection.ChangedRows() == 1;
}

absl::StatusOr<bool> EgressRepo::HasOnce(absl::string_view sandbox_id, absl::string_view name) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("SELECT 1 FROM egress_requests WHERE sandbox_id = ? "
                                           "AND name = ? AND state = 'approved_once' AND "
                                           "once_left = 1"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  ABOX_RETURN_IF_ERROR(stmt.BindText(2, name));
  return stmt.Step();
}

absl::StatusOr<int64_t> EgressRepo::Ignore(absl::string_view name) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(connection));
  ABOX_ASSIGN_OR_RETURN(Statement add,
                        connection.Prepare("INSERT OR IGNORE INTO egress_ignored (name, "
                                           "ignored_at) VALUES (?, ?)"));
  ABOX_RETURN_IF_ERROR(add.BindText(1, name));
  ABOX_RETURN_IF_ERROR(add.BindInt64(2, ToMillis(clock_())));
  ABOX_RETURN_IF_ERROR(add.Run());
  ABOX_ASSIGN_OR_RETURN(Statement mark,
                        connection.Prepare("UPDATE egress_requests SET state = 'ignored', "
                                           "once_left = 0 WHERE name = ? AND state = 'pending'"));
  ABOX_RETURN_IF_ERROR(mark.BindText(1, name));
  ABOX_RETURN_IF_ERROR(mark.Run());
  int64_t changed = connection.ChangedRows();
  ABOX_RETURN_IF_ERROR(transaction.Commit());
  return changed;
}

absl::StatusOr<RetentionCounters> EgressRepo::Counters(absl::string_view sandbox_id) {
  Connection connection = db_->Lock();
  return ReadRetentionCounters(connection, sandbox_id);
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> EgressRepo::QueueDropped() {
  Connection connection = db_->Lock();
  return ReadQueueDropped(connection);
}

absl::StatusOr<bool> EgressRepo::IsIgnored(absl::string_view name) {
  Connection connection = db_->Lock();
  return Ignored(connection, name);
}

}  // namespace abox::store
