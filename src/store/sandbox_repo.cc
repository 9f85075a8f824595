#include "src/store/sandbox_repo.h"

#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/status_macros.h"

namespace abox::store {
namespace {

constexpr std::array<const char*, 7> kStateNames = {"creating", "ready",   "stopping", "stopped",
                                                    "failed",   "removed", "paused"};

constexpr char kColumns[] =
    "id, name, image, cpus, memory_mib, labels, state, failure, run_dir, created_at, ready_at, "
    "ttl_seconds, idle_timeout_seconds, last_active_at, vmm_pid, accel, disk_mib";
// How many columns kColumns names: a query's own columns come after them.
constexpr int kColumnCount = 17;

constexpr size_t kIdLength = 12;
constexpr size_t kMinPrefix = 3;
// How many candidates an ambiguous prefix error lists.
constexpr int kMaxCandidates = 10;

bool IsLowerHex(absl::string_view text) {
  for (char c : text) {
    if (!absl::ascii_isdigit(c) && (c < 'a' || c > 'f')) {
      return false;
    }
  }
  return true;
}

absl::Status NoSandbox(absl::string_view ref) {
  return absl::NotFoundError(absl::StrCat("no sandbox '", ref, "'"));
}

// Reads the current row, whose columns are kColumns in order.
absl::StatusOr<SandboxRecord> ReadRow(const Statement& stmt) {
  SandboxRecord s;
  s.id = stmt.ColumnText(0);
  s.name = stmt.ColumnText(1);
  s.image = stmt.ColumnText(2);
  s.cpus = static_cast<int>(stmt.ColumnInt64(3));
  s.memory_mib = static_cast<int>(stmt.ColumnInt64(4));
  ABOX_ASSIGN_OR_RETURN(s.labels, StringMapFromJson(stmt.ColumnText(5), "sandboxes.labels"));
  ABOX_ASSIGN_OR_RETURN(s.state, ParseSandboxState(stmt.ColumnText(6)));
  s.failure = stmt.ColumnText(7);
  s.run_dir = stmt.ColumnText(8);
  s.created_at = FromMillis(stmt.ColumnInt64(9));
  s.ready_at = FromMillis(stmt.ColumnOptionalInt64(10));
  s.ttl_seconds = stmt.ColumnInt64(11);
  s.idle_timeout_seconds = stmt.ColumnInt64(12);
  s.last_active_at = FromMillis(stmt.ColumnOptionalInt64(13));
  s.vmm_pid = stmt.ColumnOptionalInt64(14).value_or(0);
  s.accel = stmt.ColumnText(15);
  s.disk_mib = stmt.ColumnInt64(16);
  return s;
}

absl::StatusOr<std::vector<SandboxRecord>> ReadAll(Statement& stmt) {
  std::vector<SandboxRecord> out;
  while (true) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return out;
    }
    ABOX_ASSIGN_OR_RETURN(SandboxRecord record, ReadRow(stmt));
    out.push_back(std::move(record));
  }
}

// The sandboxes where `column` = `value` (at most one: both columns are unique).
absl::StatusOr<std::optional<SandboxRecord>> FindBy(Connection& connection,
                                                    absl::string_view column,
                                                    absl::string_view value) {
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt, connection.Prepare(absl::StrCat("SELECT ", kColumns, " FROM sandboxes WHERE ",
                                                      column, " = ?")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, value));
  ABOX_ASSIGN_OR_RETURN(std::vector<SandboxRecord> rows, ReadAll(stmt));
  if (rows.empty()) {
    return std::nullopt;
  }
  return std::move(rows.front());
}

// Runs an UPDATE / DELETE on one sandbox prepared with `sql` (`:id` names it); kNotFound when
// no row changed.
template <typename BindFn>
absl::Status ChangeOne(Database& db, absl::string_view id, const char* sql, BindFn bind) {
  Connection connection = db.Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare(sql));
  ABOX_RETURN_IF_ERROR(stmt.BindText(":id", id));
  ABOX_RETURN_IF_ERROR(bind(stmt));
  ABOX_RETURN_IF_ERROR(stmt.Run());
  if (connection.ChangedRows() == 0) {
    return NoSandbox(id);
  }
  return absl::OkStatus();
}

}  // namespace

const char* SandboxStateName(SandboxState state) { return kStateNames[static_cast<size_t>(state)]; }

absl::StatusOr<SandboxState> ParseSandboxState(absl::string_view text) {
  for (size_t i = 0; i < kStateNames.size(); ++i) {
    if (text == kStateNames[i]) {
      return static_cast<SandboxState>(i);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown sandbox state '", text, "'"));
}

absl::StatusOr<SandboxRecord> SandboxRepo::Insert(const SandboxRecord& sandbox) {
  if (sandbox.id.size() != kIdLength || !IsLowerHex(sandbox.id)) {
    return absl::InvalidArgumentError(absl::StrCat("sandbox id '", sandbox.id, "' is not ",
                                                   kIdLength, " lowercase hex characters"));
  }
  SandboxRecord stored = sandbox;
  stored.created_at = FromMillis(ToMillis(clock_()));  // as precise as the column

  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(connection));
  ABOX_ASSIGN_OR_RETURN(auto same_id, FindBy(connection, "id", stored.id));
  if (same_id.has_value()) {
    return absl::AlreadyExistsError(absl::StrCat("sandbox id ", stored.id, " is already in use"));
  }
  if (!stored.name.empty()) {
    ABOX_ASSIGN_OR_RETURN(auto same_name, FindBy(connection, "name", stored.name));
    if (same_name.has_value()) {
      return absl::AlreadyExistsError(absl::StrCat("the name '", stored.name,
                                                   "' is taken by sandbox ", same_name->id,
                                                   "; choose another name or remove that sandbox"));
    }
  }
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare(absl::StrCat(
                            "INSERT INTO sandboxes (", kColumns,
                            ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, stored.id));
  if (stored.name.empty()) {
    ABOX_RETURN_IF_ERROR(stmt.BindNull(2));
  } else {
    ABOX_RETURN_IF_ERROR(stmt.BindText(2, stored.name));
  }
  ABOX_RETURN_IF_ERROR(stmt.BindText(3, stored.image));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(4, stored.cpus));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(5, stored.memory_mib));
  ABOX_RETURN_IF_ERROR(stmt.BindText(6, StringMapToJson(stored.labels)));
  ABOX_RETURN_IF_ERROR(stmt.BindText(7, SandboxStateName(stored.state)));
  ABOX_RETURN_IF_ERROR(stmt.BindText(8, stored.failure));
  ABOX_RETURN_IF_ERROR(stmt.BindText(9, stored.run_dir));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(10, ToMillis(stored.created_at)));
  ABOX_RETURN_IF_ERROR(stmt.BindOptionalInt64(11, ToMillis(stored.ready_at)));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(12, stored.ttl_seconds));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(13, stored.idle_timeout_seconds));
  ABOX_RETURN_IF_ERROR(stmt.BindOptionalInt64(14, ToMillis(stored.last_active_at)));
  if (stored.vmm_pid == 0) {
    ABOX_RETURN_IF_ERROR(stmt.BindNull(15));
  } else {
    ABOX_RETURN_IF_ERROR(stmt.BindInt64(15, stored.vmm_pid));
  }
  ABOX_RETURN_IF_ERROR(stmt.BindText(16, stored.accel));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(17, stored.disk_mib));
  ABOX_RETURN_IF_ERROR(stmt.Run());
  ABOX_RETURN_IF_ERROR(transaction.Commit());
  // Read back what SQLite stored (times at millisecond precision, labels re-encoded).
  ABOX_ASSIGN_OR_RETURN(auto row, FindBy(connection, "id", stored.id));
  if (!row.has_value()) {
    return absl::InternalError(absl::StrCat("sandbox ", stored.id, " vanished after insert"));
  }
  return std::move(*row);
}

absl::StatusOr<SandboxRecord> SandboxRepo::Get(absl::string_view id) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(auto row, FindBy(connection, "id", id));
  if (!row.has_value()) {
    return NoSandbox(id);
  }
  return std::move(*row);
}

absl::StatusOr<SandboxRecord> SandboxRepo::Resolve(absl::string_view ref) {
  if (ref.empty()) {
    return absl::InvalidArgumentError(
        "empty sandbox reference; give an id, a name or an id prefix");
  }
  Connection connection = db_->Lock();
  for (absl::string_view column : {"id", "name"}) {
    ABOX_ASSIGN_OR_RETURN(auto row, FindBy(connection, column, ref));
    if (row.has_value()) {
      return std::move(*row);
    }
  }
  if (ref.size() < kMinPrefix || ref.size() >= kIdLength || !IsLowerHex(ref)) {
    return NoSandbox(ref);
  }
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare(absl::StrCat(
                                            "SELECT ", kColumns,
                                            " FROM sandboxes WHERE substr(id, 1, ?1) = ?2 "
                                            "ORDER BY id LIMIT ?3")));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(1, static_cast<int64_t>(ref.size())));
  ABOX_RETURN_IF_ERROR(stmt.BindText(2, ref));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(3, kMaxCandidates + 1));
  ABOX_ASSIGN_OR_RETURN(std::vector<SandboxRecord> rows, ReadAll(stmt));
  if (rows.empty()) {
    return NoSandbox(ref);
  }
  if (rows.size() == 1) {
    return std::move(rows.front());
  }
  std::vector<std::string> candidates;
  for (size_t i = 0; i < rows.size() && i < kMaxCandidates; ++i) {
    candidates.push_back(rows[i].name.empty() ? rows[i].id
                                              : absl::StrCat(rows[i].id, " (", rows[i].name, ")"));
  }
  if (rows.size() > kMaxCandidates) {
    candidates.emplace_back("...");
  }
  return absl::FailedPreconditionError(
      absl::StrCat("sandbox id prefix '", ref, "' is ambiguous: it matches ",
                   absl::StrJoin(candidates, ", "), "; give more of the id, or the name"));
}

absl::StatusOr<std::vector<SandboxRecord>> SandboxRepo::List(const SandboxFilter& filter) {
  std::string sql = absl::StrCat("SELECT ", kColumns, " FROM sandboxes WHERE 1");
  if (!filter.states.empty()) {
    std::vector<std::string> marks(filter.states.size(), "?");
    absl::StrAppend(&sql, " AND state IN (", absl::StrJoin(marks, ", "), ")");
  }
  // json_each compares keys and values as data, so any characters in them are safe.
  for (size_t i = 0; i < filter.labels.size(); ++i) {
    absl::StrAppend(&sql,
                    " AND EXISTS (SELECT 1 FROM json_each(sandboxes.labels) "
                    "WHERE key = ? AND type = 'text' AND value = ?)");
  }
  absl::StrAppend(&sql, " ORDER BY created_at DESC, rowid DESC");

  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare(sql));
  int index = 1;
  for (SandboxState state : filter.states) {
    ABOX_RETURN_IF_ERROR(stmt.BindText(index++, SandboxStateName(state)));
  }
  for (const auto& [key, value] : filter.labels) {
    ABOX_RETURN_IF_ERROR(stmt.BindText(index++, key));
    ABOX_RETURN_IF_ERROR(stmt.BindText(index++, value));
  }
  return ReadAll(stmt);
}

absl::Status SandboxRepo::UpdateState(absl::string_view id, SandboxState state,
                                      absl::string_view failure) {
  // In SET expressions, column names refer to the row before the update.
  return ChangeOne(*db_, id,
                   "UPDATE sandboxes SET state = :state, failure = :failure, "
                   "ready_at = CASE WHEN :state = 'ready' THEN coalesce(ready_at, :now) "
                   "ELSE ready_at END, "
                   "last_active_at = CASE WHEN :state = 'ready' THEN :now "
                   "ELSE last_active_at END "
                   "WHERE id = :id",
                   [&](Statement& stmt) -> absl::Status {
                     ABOX_RETURN_IF_ERROR(stmt.BindText(":state", SandboxStateName(state)));
                     ABOX_RETURN_IF_ERROR(stmt.BindText(":failure", failure));
                     return stmt.BindInt64(":now", ToMillis(clock_()));
                   });
}

absl::Status SandboxRepo::TransitionState(absl::string_view id, SandboxState from, SandboxState to,
                                          absl::string_view failure) {
  absl::Status changed = ChangeOne(
      *db_, id,
      "UPDATE sandboxes SET state = :state, failure = :failure, "
      "ready_at = CASE WHEN :state = 'ready' THEN coalesce(ready_at, :now) ELSE ready_at END, "
      "last_active_at = CASE WHEN :state = 'ready' THEN :now ELSE last_active_at END "
      "WHERE id = :id AND state = :from",
      [&](Statement& stmt) -> absl::Status {
        ABOX_RETURN_IF_ERROR(stmt.BindText(":state", SandboxStateName(to)));
        ABOX_RETURN_IF_ERROR(stmt.BindText(":from", SandboxStateName(from)));
        ABOX_RETURN_IF_ERROR(stmt.BindText(":failure", failure));
        return stmt.BindInt64(":now", ToMillis(clock_()));
      });
  if (!absl::IsNotFound(changed)) {
    return changed;
  }
  ABOX_ASSIGN_OR_RETURN(SandboxRecord now, Get(id));
  return absl::FailedPreconditionError(absl::StrCat(
      "sandbox ", id, " is ", SandboxStateName(now.state), ", not ", SandboxStateName(from)));
}

absl::Status SandboxRepo::SetVm(absl::string_view id, int64_t vmm_pid, absl::string_view accel) {
  return ChangeOne(*db_, id, "UPDATE sandboxes SET vmm_pid = :pid, accel = :accel WHERE id = :id",
                   [&](Statement& stmt) -> absl::Status {
                     ABOX_RETURN_IF_ERROR(stmt.BindInt64(":pid", vmm_pid));
                     return stmt.BindText(":accel", accel);
                   });
}

absl::Status SandboxRepo::SetRunDir(absl::string_view id, absl::string_view run_dir) {
  return ChangeOne(*db_, id, "UPDATE sandboxes SET run_dir = :run_dir WHERE id = :id",
                   [&](Statement& stmt) { return stmt.BindText(":run_dir", run_dir); });
}

absl::Status SandboxRepo::Touch(absl::string_view id) {
  return ChangeOne(*db_, id, "UPDATE sandboxes SET last_active_at = :now WHERE id = :id",
                   [&](Statement& stmt) { return stmt.BindInt64(":now", ToMillis(clock_())); });
}

absl::Status SandboxRepo::Delete(absl::string_view id) {
  return ChangeOne(*db_, id, "DELETE FROM sandboxes WHERE id = :id",
                   [](Statement&) { return absl::OkStatus(); });
}

absl::StatusOr<std::vector<ExpiredSandbox>> SandboxRepo::Expired(absl::Time now) {
  constexpr char kTtlDue[] =
      "(state IN ('creating', 'ready', 'paused') AND ttl_seconds > 0 "
      "AND created_at + ttl_seconds * 1000 <= :now)";
  constexpr char kIdleDue[] =
      "(state = 'ready' AND idle_timeout_seconds > 0 "
      "AND coalesce(last_active_at, ready_at, created_at) + idle_timeout_seconds * 1000 <= :now)";
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare(absl::StrCat("SELECT ", kColumns, ", ", kTtlDue, " FROM sandboxes WHERE ",
                                      kTtlDue, " OR ", kIdleDue, " ORDER BY created_at, rowid")));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(":now", ToMillis(now)));
  std::vector<ExpiredSandbox> out;
  while (true) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return out;
    }
    ABOX_ASSIGN_OR_RETURN(SandboxRecord record, ReadRow(stmt));
    ExpiryReason reason = stmt.ColumnBool(kColumnCount) ? ExpiryReason::kTtl : ExpiryReason::kIdle;
    out.push_back({std::move(record), reason});
  }
}

}  // namespace abox::store
