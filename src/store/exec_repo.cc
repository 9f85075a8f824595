#include "src/store/exec_repo.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::store {
namespace {

constexpr std::array<const char*, 4> kStateNames = {"running", "exited", "failed", "interrupted"};
constexpr std::array<const char*, 2> kStreamNames = {"stdout", "stderr"};

constexpr char kColumns[] =
    "id, sandbox_id, argv, shell, env, cwd, user, pty, timeout_ms, state, exit_code, signal, "
    "timed_out, error, started_at, finished_at, output_bytes, output_truncated, oom_kills";

template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseName(const std::array<const char*, N>& names, absl::string_view text,
                               absl::string_view what) {
  for (size_t i = 0; i < N; ++i) {
    if (text == names[i]) {
      return static_cast<Enum>(i);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ", what, " '", text, "'"));
}

absl::Status NoExec(absl::string_view id) {
  return absl::NotFoundError(absl::StrCat("no exec '", id, "'"));
}

std::optional<int> ToInt(std::optional<int64_t> value) {
  if (!value.has_value()) {
    return std::nullopt;
  }
  return static_cast<int>(*value);
}

// Reads the current row, whose columns are kColumns in order.
absl::StatusOr<ExecRecord> ReadRow(const Statement& stmt) {
  ExecRecord e;
  e.id = stmt.ColumnText(0);
  e.sandbox_id = stmt.ColumnText(1);
  ABOX_ASSIGN_OR_RETURN(e.argv, StringListFromJson(stmt.ColumnText(2), "execs.argv"));
  e.shell = stmt.ColumnText(3);
  ABOX_ASSIGN_OR_RETURN(e.env, StringMapFromJson(stmt.ColumnText(4), "execs.env"));
  e.cwd = stmt.ColumnText(5);
  e.user = stmt.ColumnText(6);
  e.pty = stmt.ColumnBool(7);
  e.timeout_ms = stmt.ColumnInt64(8);
  ABOX_ASSIGN_OR_RETURN(e.state, ParseExecState(stmt.ColumnText(9)));
  if (e.state != ExecState::kRunning) {
    e.result.state = e.state;
  }
  e.result.exit_code = ToInt(stmt.ColumnOptionalInt64(10));
  e.result.signal = ToInt(stmt.ColumnOptionalInt64(11));
  e.result.timed_out = stmt.ColumnBool(12);
  e.result.error = stmt.ColumnText(13);
  e.started_at = FromMillis(stmt.ColumnInt64(14));
  e.finished_at = FromMillis(stmt.ColumnOptionalInt64(15));
  e.output_bytes = stmt.ColumnInt64(16);
  e.output_truncated = stmt.ColumnBool(17);
  e.result.oom_kills = stmt.ColumnInt64(18);
  return e;
}

absl::StatusOr<std::optional<ExecRecord>> FindExec(Connection& connection, absl::string_view id) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare(absl::StrCat(
                                            "SELECT ", kColumns, " FROM execs WHERE id = ?")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, id));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return std::nullopt;
  }
  return ReadRow(stmt);
}

absl::StatusOr<bool> SandboxExists(Connection& connection, absl::string_view id) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare("SELECT 1 FROM sandboxes WHERE id = ?"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, id));
  return stmt.Step();
}

absl::Status InsertRow(Connection& connection, const ExecRecord& e) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare(absl::StrCat(
                            "INSERT INTO execs (", kColumns, ") VALUES ",
                            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, e.id));
  ABOX_RETURN_IF_ERROR(stmt.BindText(2, e.sandbox_id));
  ABOX_RETURN_IF_ERROR(stmt.BindText(3, StringListToJson(e.argv)));
  ABOX_RETURN_IF_ERROR(stmt.BindText(4, e.shell));
  ABOX_RETURN_IF_ERROR(stmt.BindText(5, StringMapToJson(e.env)));
  ABOX_RETURN_IF_ERROR(stmt.BindText(6, e.cwd));
  ABOX_RETURN_IF_ERROR(stmt.BindText(7, e.user));
  ABOX_RETURN_IF_ERROR(stmt.BindBool(8, e.pty));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(9, e.timeout_ms));
  ABOX_RETURN_IF_ERROR(stmt.BindText(10, ExecStateName(ExecState::kRunning)));
  ABOX_RETURN_IF_ERROR(stmt.BindNull(11));
  ABOX_RETURN_IF_ERROR(stmt.BindNull(12));
  ABOX_RETURN_IF_ERROR(stmt.BindBool(13, false));
  ABOX_RETURN_IF_ERROR(stmt.BindText(14, ""));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(15, ToMillis(e.started_at)));
  ABOX_RETURN_IF_ERROR(stmt.BindNull(16));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(17, 0));
  ABOX_RETURN_IF_ERROR(stmt.BindBool(18, false));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(19, 0));
  return stmt.Run();
}

// Deletes the oldest chunks of `exec_id` until `excess` bytes are gone, and marks the exec
// truncated with its new byte count. Reads only the chunks it drops (oldest first, by the
// primary key), so an append costs the same however many chunks are kept.
absl::Status DropOldest(Connection& connection, absl::string_view exec_id, int64_t excess) {
  int64_t dropped = 0;
  int64_t last_dropped = 0;
  {
    ABOX_ASSIGN_OR_RETURN(Statement oldest,
                          connection.Prepare("SELECT seq, length(data) FROM exec_output "
                                             "WHERE exec_id = ? ORDER BY seq"));
    ABOX_RETURN_IF_ERROR(oldest.BindText(1, exec_id));
    while (dropped < excess) {
      ABOX_ASSIGN_OR_RETURN(bool row, oldest.Step());
      if (!row) {
        return absl::InternalError(absl::StrCat("exec ", exec_id, ": output_bytes exceeds the ",
                                                "stored output (state database damaged?)"));
      }
      last_dropped = oldest.ColumnInt64(0);
      dropped += oldest.ColumnInt64(1);
    }
  }
  if (dropped > 0) {
    ABOX_ASSIGN_OR_RETURN(Statement drop, connection.Prepare("DELETE FROM exec_output "
                                                             "WHERE exec_id = ? AND seq <= ?"));
    ABOX_RETURN_IF_ERROR(drop.BindText(1, exec_id));
    ABOX_RETURN_IF_ERROR(drop.BindInt64(2, last_dropped));
    ABOX_RETURN_IF_ERROR(drop.Run());
  }
  ABOX_ASSIGN_OR_RETURN(Statement mark,
                        connection.Prepare("UPDATE execs SET output_truncated = 1, "
                                           "output_bytes = output_bytes - ? WHERE id = ?"));
  ABOX_RETURN_IF_ERROR(mark.BindInt64(1, dropped));
  ABOX_RETURN_IF_ERROR(mark.BindText(2, exec_id));
  return mark.Run();
}

}  // namespace

const char* ExecStateName(ExecState state) { return kStateNames[static_cast<size_t>(state)]; }

absl::StatusOr<ExecState> ParseExecState(absl::string_view text) {
  return ParseName<ExecState>(kStateNames, text, "exec state");
}

const char* ExecStreamName(ExecStream stream) { return kStreamNames[static_cast<size_t>(stream)]; }

absl::StatusOr<ExecStream> ParseExecStream(absl::string_view text) {
  return ParseName<ExecStream>(kStreamNames, text, "output stream");
}

ExecRepo::ExecRepo(Database& db, Clock clock, ExecRepoOptions options)
    : db_(&db), clock_(std::move(clock)), options_(options) {
  options_.output_cap_bytes = std::max<int64_t>(options_.output_cap_bytes, 1);
}

absl::StatusOr<ExecRecord> ExecRepo::Insert(const ExecRecord& exec) {
  if (exec.id.empty()) {
    return absl::InvalidArgumentError("exec id is empty");
  }
  if (exec.argv.empty() == exec.shell.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("exec ", exec.id,
                                                   ": give either argv or a shell command, not ",
                                                   exec.argv.empty() ? "neither" : "both"));
  }
  ExecRecord stored = exec;
  stored.state = ExecState::kRunning;
  stored.result = ExecResult();
  stored.started_at = FromMillis(ToMillis(clock_()));
  stored.finished_at.reset();
  stored.output_bytes = 0;
  stored.output_truncated = false;

  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(connection));
  ABOX_ASSIGN_OR_RETURN(bool sandbox_exists, SandboxExists(connection, stored.sandbox_id));
  if (!sandbox_exists) {
    return absl::NotFoundError(absl::StrCat("no sandbox '", stored.sandbox_id, "'"));
  }
  ABOX_ASSIGN_OR_RETURN(auto existing, FindExec(connection, stored.id));
  if (existing.has_value()) {
    return absl::AlreadyExistsError(absl::StrCat("exec id ", stored.id, " is already in use"));
  }
  ABOX_RETURN_IF_ERROR(InsertRow(connection, stored));
  ABOX_RETURN_IF_ERROR(transaction.Commit());
  return stored;
}

absl::Status ExecRepo::Append(absl::string_view exec_id, ExecStream stream,
                              absl::string_view data) {
  return AppendBatch(exec_id, {OutputPiece{stream, std::string(data)}});
}

absl::Status ExecRepo::AppendBatch(absl::string_view exec_id,
                                   const std::vector<OutputPiece>& pieces) {
  bool any = false;
  for (const OutputPiece& piece : pieces) {
    any = any || !piece.data.empty();
  }
  if (!any) {
    return absl::OkStatus();
  }
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(connection));
  for (const OutputPiece& piece : pieces) {
    ABOX_RETURN_IF_ERROR(AppendIn(connection, exec_id, piece.stream, piece.data));
  }
  ABOX_RETURN_IF_ERROR(transaction.Commit());
  ++output_transactions_;
  return absl::OkStatus();
}

absl::Status ExecRepo::AppendIn(Connection& connection, absl::string_view exec_id,
                                ExecStream stream, absl::string_view data) {
  if (data.empty()) {
    return absl::OkStatus();
  }
  const int64_t cap = options_.output_cap_bytes;
  // A chunk larger than the whole cap would push out everything, itself included: keep its end.
  bool cut = static_cast<int64_t>(data.size()) > cap;
  if (cut) {
    data.remove_prefix(data.size() - static_cast<size_t>(cap));
  }
  ABOX_ASSIGN_OR_RETURN(Statement count,
                        connection.Prepare("UPDATE execs SET output_bytes = output_bytes + :n "
                                           "WHERE id = :id RETURNING output_bytes"));
  ABOX_RETURN_IF_ERROR(count.BindInt64(":n", static_cast<int64_t>(data.size())));
  ABOX_RETURN_IF_ERROR(count.BindText(":id", exec_id));
  ABOX_ASSIGN_OR_RETURN(bool found, count.Step());
  if (!found) {
    return NoExec(exec_id);
  }
  const int64_t total = count.ColumnInt64(0);
  ABOX_RETURN_IF_ERROR(count.Run());  // finish the UPDATE ... RETURNING

  ABOX_ASSIGN_OR_RETURN(
      Statement insert,
      connection.Prepare("INSERT INTO exec_output (exec_id, seq, stream, data) VALUES (:id, "
                         "(SELECT coalesce(max(seq), 0) + 1 FROM exec_output WHERE exec_id = :id),"
                         " :stream, :data)"));
  ABOX_RETURN_IF_ERROR(insert.BindText(":id", exec_id));
  ABOX_RETURN_IF_ERROR(insert.BindText(":stream", ExecStreamName(stream)));
  ABOX_RETURN_IF_ERROR(insert.BindBlob(":data", data));
  ABOX_RETURN_IF_ERROR(insert.Run());
  if (cut || total > cap) {
    ABOX_RETURN_IF_ERROR(DropOldest(connection, exec_id, total - cap));
  }
  return absl::OkStatus();
}

absl::Status ExecRepo::Finish(absl::string_view exec_id, const ExecResult& result) {
  if (result.state == ExecState::kRunning) {
    return absl::InvalidArgumentError(
        absl::StrCat("exec ", exec_id, ": a finished exec cannot be in state running"));
  }
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare("UPDATE execs SET state = :state, exit_code = :exit, signal = :signal, "
                         "timed_out = :timed_out, error = :error, finished_at = :now, "
                         "oom_kills = :oom_kills WHERE id = :id AND state = 'running'"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(":state", ExecStateName(result.state)));
  ABOX_RETURN_IF_ERROR(stmt.BindOptionalInt64(":exit", result.exit_code));
  ABOX_RETURN_IF_ERROR(stmt.BindOptionalInt64(":signal", result.signal));
  ABOX_RETURN_IF_ERROR(stmt.BindBool(":timed_out", result.timed_out));
  ABOX_RETURN_IF_ERROR(stmt.BindText(":error", result.error));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(":oom_kills", std::max<int64_t>(result.oom_kills, 0)));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(":now", ToMillis(clock_())));
  ABOX_RETURN_IF_ERROR(stmt.BindText(":id", exec_id));
  ABOX_RETURN_IF_ERROR(stmt.Run());
  if (connection.ChangedRows() == 1) {
    return absl::OkStatus();
  }
  ABOX_ASSIGN_OR_RETURN(auto existing, FindExec(connection, exec_id));
  if (!existing.has_value()) {
    return NoExec(exec_id);
  }
  return absl::FailedPreconditionError(
      absl::StrCat("exec ", exec_id, " already ended (", ExecStateName(existing->state), ")"));
}

absl::StatusOr<ExecRecord> ExecRepo::Get(absl::string_view exec_id) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(auto exec, FindExec(connection, exec_id));
  if (!exec.has_value()) {
    return NoExec(exec_id);
  }
  return std::move(*exec);
}

absl::StatusOr<ExecWithOutput> ExecRepo::GetWithOutput(absl::string_view exec_id) {
  Connection connection = db_->Lock();
  // One read transaction: the row and its chunks from the same snapshot, even if another
  // process appends meanwhile.
  ABOX_ASSIGN_OR_RETURN(Transaction read,
                        Transaction::Begin(connection, Transaction::Mode::kDeferred));
  ABOX_ASSIGN_OR_RETURN(auto exec, FindExec(connection, exec_id));
  if (!exec.has_value()) {
    return NoExec(exec_id);
  }
  ExecWithOutput out{std::move(*exec), {}};
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("SELECT seq, stream, data FROM exec_output "
                                           "WHERE exec_id = ? ORDER BY seq"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, exec_id));
  while (true) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      break;
    }
    OutputChunk chunk;
    chunk.seq = stmt.ColumnInt64(0);
    ABOX_ASSIGN_OR_RETURN(chunk.stream, ParseExecStream(stmt.ColumnText(1)));
    chunk.data = stmt.ColumnBlob(2);
    out.output.push_back(std::move(chunk));
  }
  ABOX_RETURN_IF_ERROR(read.Commit());
  return out;
}

absl::StatusOr<std::vector<ExecRecord>> ExecRepo::ListBySandbox(absl::string_view sandbox_id,
                                                                int limit) {
  if (limit < 1) {
    return absl::InvalidArgumentError(absl::StrCat("exec list limit ", limit, " is below 1"));
  }
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare(absl::StrCat(
                                            "SELECT ", kColumns,
                                            " FROM execs WHERE sandbox_id = ? "
                                            "ORDER BY started_at DESC, rowid DESC LIMIT ?")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(2, limit));
  std::vector<ExecRecord> out;
  while (true) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return out;
    }
    ABOX_ASSIGN_OR_RETURN(ExecRecord exec, ReadRow(stmt));
    out.push_back(std::move(exec));
  }
}

absl::StatusOr<int64_t> ExecRepo::MarkRunningAsInterrupted(absl::string_view sandbox_id,
                                                           absl::string_view reason) {
  return MarkInterrupted(sandbox_id, reason);
}

absl::StatusOr<int64_t> ExecRepo::MarkAllRunningAsInterrupted(absl::string_view reason) {
  return MarkInterrupted(std::nullopt, reason);
}

absl::StatusOr<int64_t> ExecRepo::MarkInterrupted(std::optional<absl::string_view> sandbox_id,
                                                  absl::string_view reason) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare(absl::StrCat(
          "UPDATE execs SET state = 'interrupted', error = :reason, finished_at = :now "
          "WHERE state = 'running'",
          sandbox_id.has_value() ? " AND sandbox_id = :sandbox" : "")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(":reason", reason));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(":now", ToMillis(clock_())));
  if (sandbox_id.has_value()) {
    ABOX_RETURN_IF_ERROR(stmt.BindText(":sandbox", *sandbox_id));
  }
  ABOX_RETURN_IF_ERROR(stmt.Run());
  return connection.ChangedRows();
}

}  // namespace abox::store
