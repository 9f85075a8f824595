#include "src/store/retention_counters.h"

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::store {
namespace {

const char* ColumnOf(RetentionCounter counter) {
  switch (counter) {
    case RetentionCounter::kQueueDropped:
      return "queue_dropped";
    case RetentionCounter::kConnectionsPruned:
      return "connections_pruned";
    case RetentionCounter::kDnsPruned:
      return "dns_pruned";
    case RetentionCounter::kEventsPruned:
      return "events_pruned";
  }
  return "queue_dropped";  // unreachable: every enumerator is handled above
}

absl::Status EnsureRow(Connection& connection, absl::string_view sandbox_id) {
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare("INSERT OR IGNORE INTO retention_counters (sandbox_id) VALUES (?)"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  return stmt.Run();
}

struct TableColumns {
  const char* table;
  const char* scope;  // the WHERE clause selecting one scope's rows, parameter :scope
  const char* kept;
  const char* pruned;
};

TableColumns ColumnsOf(RetainedTable table) {
  switch (table) {
    case RetainedTable::kConnections:
      return {"egress_connections", "sandbox_id = :scope", "connections_kept",
              "connections_pruned"};
    case RetainedTable::kDns:
      return {"egress_dns", "sandbox_id = :scope", "dns_kept", "dns_pruned"};
    case RetainedTable::kEvents:
      // Daemon-wide events have a NULL sandbox_id; '' stands for them in the counters.
      return {"events", "sandbox_id IS nullif(:scope, '')", "events_kept", "events_pruned"};
  }
  return {"events", "sandbox_id IS nullif(:scope, '')", "events_kept", "events_pruned"};
}

}  // namespace

absl::StatusOr<int64_t> KeepNewest(Connection& connection, RetainedTable table,
                                   absl::string_view sandbox_id, int64_t keep) {
  // Table and column names come from ColumnsOf, not from input.
  const TableColumns c = ColumnsOf(table);
  ABOX_RETURN_IF_ERROR(EnsureRow(connection, sandbox_id));
  ABOX_ASSIGN_OR_RETURN(Statement bump, connection.Prepare(absl::StrCat(
                                            "UPDATE retention_counters SET ", c.kept, " = ", c.kept,
                                            " + 1 WHERE sandbox_id = ? RETURNING ", c.kept)));
  ABOX_RETURN_IF_ERROR(bump.BindText(1, sandbox_id));
  ABOX_ASSIGN_OR_RETURN(bool bumped, bump.Step());
  if (!bumped) {
    return absl::InternalError("retention_counters: the row just ensured is missing");
  }
  const int64_t kept = bump.ColumnInt64(0);
  ABOX_RETURN_IF_ERROR(bump.Run());
  if (kept <= keep) {
    return 0;
  }
  ABOX_ASSIGN_OR_RETURN(Statement oldest, connection.Prepare(absl::StrCat(
                                              "SELECT max(seq) FROM (SELECT seq FROM ", c.table,
                                              " WHERE ", c.scope, " ORDER BY seq LIMIT :excess)")));
  ABOX_RETURN_IF_ERROR(oldest.BindText(":scope", sandbox_id));
  ABOX_RETURN_IF_ERROR(oldest.BindInt64(":excess", kept - keep));
  ABOX_ASSIGN_OR_RETURN(bool row, oldest.Step());
  if (!row || oldest.ColumnIsNull(0)) {
    // The count ran ahead of the table (rows deleted with their sandbox): start again from it.
    ABOX_ASSIGN_OR_RETURN(Statement reset,
                          connection.Prepare(absl::StrCat(
                              "UPDATE retention_counters SET ", c.kept, " = (SELECT count(*) FROM ",
                              c.table, " WHERE ", c.scope, ") WHERE sandbox_id = :scope")));
    ABOX_RETURN_IF_ERROR(reset.BindText(":scope", sandbox_id));
    ABOX_RETURN_IF_ERROR(reset.Run());
    return 0;
  }
  const int64_t through = oldest.ColumnInt64(0);
  ABOX_ASSIGN_OR_RETURN(Statement prune,
                        connection.Prepare(absl::StrCat("DELETE FROM ", c.table, " WHERE ", c.scope,
                                                        " AND seq <= :through")));
  ABOX_RETURN_IF_ERROR(prune.BindText(":scope", sandbox_id));
  ABOX_RETURN_IF_ERROR(prune.BindInt64(":through", through));
  ABOX_RETURN_IF_ERROR(prune.Run());
  const int64_t pruned = connection.ChangedRows();
  ABOX_ASSIGN_OR_RETURN(Statement count,
                        connection.Prepare(absl::StrCat(
                            "UPDATE retention_counters SET ", c.kept, " = max(", c.kept,
                            " - :n, 0), ", c.pruned, " = ", c.pruned, " + :n",
                            table == RetainedTable::kEvents
                                ? ", events_pruned_through = max(events_pruned_through, :through)"
                                : "",
                            " WHERE sandbox_id = :scope")));
  ABOX_RETURN_IF_ERROR(count.BindInt64(":n", pruned));
  if (table == RetainedTable::kEvents) {
    ABOX_RETURN_IF_ERROR(count.BindInt64(":through", through));
  }
  ABOX_RETURN_IF_ERROR(count.BindText(":scope", sandbox_id));
  ABOX_RETURN_IF_ERROR(count.Run());
  return through;
}

absl::Status AddToRetentionCounter(Connection& connection, absl::string_view sandbox_id,
                                   RetentionCounter counter, int64_t n) {
  if (n <= 0) {
    return absl::OkStatus();
  }
  ABOX_RETURN_IF_ERROR(EnsureRow(connection, sandbox_id));
  // The column name comes from our own table above, not from input.
  const char* column = ColumnOf(counter);
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt, connection.Prepare(absl::StrCat("UPDATE retention_counters SET ", column,
                                                      " = ", column, " + ? WHERE sandbox_id = ?")));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(1, n));
  ABOX_RETURN_IF_ERROR(stmt.BindText(2, sandbox_id));
  return stmt.Run();
}

absl::Status NoteEventsPrunedThrough(Connection& connection, absl::string_view sandbox_id,
                                     int64_t seq) {
  ABOX_RETURN_IF_ERROR(EnsureRow(connection, sandbox_id));
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("UPDATE retention_counters SET events_pruned_through = "
                                           "max(events_pruned_through, ?) WHERE sandbox_id = ?"));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(1, seq));
  ABOX_RETURN_IF_ERROR(stmt.BindText(2, sandbox_id));
  return stmt.Run();
}

absl::StatusOr<int64_t> EventsPrunedThrough(Connection& connection) {
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare("SELECT coalesce(max(events_pruned_through), 0) FROM retention_counters"));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.ColumnInt64(0) : 0;
}

absl::StatusOr<RetentionCounters> ReadRetentionCounters(Connection& connection,
                                                        absl::string_view sandbox_id) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("SELECT queue_dropped, connections_pruned, dns_pruned, "
                                           "events_pruned FROM retention_counters "
                                           "WHERE sandbox_id = ?"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  RetentionCounters out;
  if (row) {
    out.queue_dropped = stmt.ColumnInt64(0);
    out.connections_pruned = stmt.ColumnInt64(1);
    out.dns_pruned = stmt.ColumnInt64(2);
    out.events_pruned = stmt.ColumnInt64(3);
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ReadQueueDropped(
    Connection& connection) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("SELECT sandbox_id, queue_dropped FROM "
                                           "retention_counters WHERE queue_dropped > 0 "
                                           "AND sandbox_id IN (SELECT id FROM sandboxes) "
                                           "ORDER BY sandbox_id"));
  std::vector<std::pair<std::string, int64_t>> out;
  for (;;) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return out;
    }
    out.emplace_back(stmt.ColumnText(0), stmt.ColumnInt64(1));
  }
}

}  // namespace abox::store
