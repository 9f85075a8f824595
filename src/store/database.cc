#include "src/store/database.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"

namespace abox::store {
namespace {

// Creates the missing directories on the way to `dir`, each 0700. Existing ones are left as
// they are (they may be the user's own, like ~/.local/share).
absl::Status MakeDirs(const std::filesystem::path& dir) {
  if (dir.empty()) {
    return absl::OkStatus();
  }
  std::filesystem::path partial;
  for (const auto& part : dir) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return base::ErrnoError(absl::StrCat("mkdir(", partial.string(), ")"));
    }
  }
  return absl::OkStatus();
}

// Creates `path` 0600 if missing; tightens an existing file to 0600. Refuses symlinks and
// anything that is not a regular file.
absl::Status PrepareFile(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) {
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(
          absl::StrCat(path,
                       " is a symbolic link; abox keeps its state in a regular file. "
                       "Remove the link and restart."));
    }
    return base::ErrnoError(absl::StrCat("open(", path, ")"));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("fstat(", path, ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  if ((st.st_mode & 07777) != 0600 && ::fchmod(fd.get(), 0600) != 0) {
    return base::ErrnoError(absl::StrCat("fchmod(", path, ", 0600)"));
  }
  return absl::OkStatus();
}

// Runs a pragma that returns one value and returns it as text.
absl::StatusOr<std::string> PragmaValue(Connection& connection, absl::string_view pragma) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare(pragma));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return absl::InternalError(absl::StrCat("'", pragma, "' returned no row"));
  }
  return stmt.ColumnText(0);
}

absl::Status Configure(Connection& connection) {
  // The first statement reads the file header, so this is where a damaged or foreign file
  // shows up (SQLITE_NOTADB -> kDataLoss).
  ABOX_ASSIGN_OR_RETURN(std::string mode, PragmaValue(connection, "PRAGMA journal_mode=WAL"));
  if (absl::AsciiStrToLower(mode) != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat("SQLite could not switch to WAL mode (journal_mode is '", mode,
                     "'); keep $ABOX_HOME on a local filesystem that supports shared memory"));
  }
  ABOX_RETURN_IF_ERROR(connection.Execute("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL"));
  ABOX_ASSIGN_OR_RETURN(std::string fk, PragmaValue(connection, "PRAGMA foreign_keys"));
  if (fk != "1") {
    return absl::FailedPreconditionError("this SQLite library does not enforce foreign keys");
  }
  return absl::OkStatus();
}

// Puts the file and what to do next in front of an open error.
absl::Status OpenError(const std::string& path, const absl::Status& status) {
  std::string advice;
  if (status.code() == absl::StatusCode::kDataLoss) {
    advice = absl::StrCat("; the file is not a SQLite database or is damaged. Move it aside (",
                          "e.g. mv ", path, " ", path,
                          ".broken) to start with empty state, or restore a backup");
  } else if (status.code() == absl::StatusCode::kUnavailable) {
    advice = absl::StrCat("; another process kept it locked throughout. Find it with `fuser ", path,
                          "` and try again once it is done");
  }
  return absl::Status(status.code(), absl::StrCat("cannot open state database ", path, ": ",
                                                  status.message(), advice));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                         const DatabaseOptions& options) {
  if (path.empty()) {
    return absl::InvalidArgumentError("database path is empty");
  }
  absl::Status prepared = MakeDirs(std::filesystem::path(path).parent_path());
  if (prepared.ok()) {
    prepared = PrepareFile(path);
  }
  if (!prepared.ok()) {
    return OpenError(path, prepared);
  }

  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX |
              SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  // sqlite3_open_v2 allocates a handle even when it fails; the Database owns it from here.
  auto db = std::unique_ptr<Database>(new Database(raw, path, options.busy_timeout));
  if (rc != SQLITE_OK) {
    return OpenError(path, SqliteError(raw, rc, "open", path));
  }
  sqlite3_busy_timeout(raw, static_cast<int>(absl::ToInt64Milliseconds(options.busy_timeout)));
  absl::Status configured = db->RetryWhileBusy([&db] {
    Connection connection = db->Lock();
    return Configure(connection);
  });
  if (!configured.ok()) {
    return OpenError(path, configured);
  }
  return db;
}

absl::Status Database::RetryWhileBusy(const std::function<absl::Status()>& step) {
  const absl::Time deadline = absl::Now() + busy_timeout_;
  absl::Duration pause = absl::Milliseconds(5);
  for (;;) {
    absl::Status status = step();
    if (!absl::IsUnavailable(status) || absl::Now() + pause > deadline) {
      return status;
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(100));
  }
}

Database::~Database() {
  for (auto& [sql, stmt] : statement_cache_) {
    sqlite3_finalize(stmt);
  }
  // close_v2 defers the close until any statement still alive is finalized.
  sqlite3_close_v2(db_);
}

Connection Database::Lock() { return Connection(*this); }

absl::StatusOr<Statement> Connection::Prepare(absl::string_view sql) {
  std::string text(sql);
  if (auto cached = db_.statement_cache_.find(text); cached != db_.statement_cache_.end()) {
    sqlite3_stmt* stmt = cached->second;
    db_.statement_cache_.erase(cached);
    return Statement(db_.db_, stmt, std::move(text), &db_.statement_cache_);
  }
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v3(db_.db_, sql.data(), static_cast<int>(sql.size()), 0, &stmt, &tail);
  if (rc != SQLITE_OK) {
    return SqliteError(db_.db_, rc, "prepare", sql);
  }
  Statement statement(db_.db_, stmt, std::move(text), &db_.statement_cache_);
  if (stmt == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no SQL statement in '", sql, "'"));
  }
  absl::string_view rest(tail, static_cast<size_t>(sql.data() + sql.size() - tail));
  if (!absl::StripAsciiWhitespace(rest).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("more than one SQL statement in '", sql, "'; use Execute()"));
  }
  return statement;
}

absl::Status Connection::Execute(absl::string_view sql) {
  std::string text(sql);  // sqlite3_exec needs a terminated string
  char* error = nullptr;
  int rc = sqlite3_exec(db_.db_, text.c_str(), nullptr, nullptr, &error);
  sqlite3_free(error);  // sqlite3_errmsg has the same text
  if (rc != SQLITE_OK) {
    return SqliteError(db_.db_, rc, "exec", sql);
  }
  return absl::OkStatus();
}

int64_t Connection::ChangedRows() { return sqlite3_changes64(db_.db_); }

bool Connection::InTransaction() { return sqlite3_get_autocommit(db_.db_) == 0; }

absl::StatusOr<Transaction> Transaction::Begin(Connection& connection, Mode mode) {
  ABOX_RETURN_IF_ERROR(
      connection.Execute(mode == Mode::kImmediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED"));
  return Transaction(connection);
}

Transaction::Transaction(Transaction&& other) noexcept
    : connection_(std::exchange(other.connection_, nullptr)) {}

Transaction::~Transaction() {
  // SQLite may already have rolled back by itself (e.g. after SQLITE_FULL); then there is
  // nothing left to undo.
  if (connection_ != nullptr && connection_->InTransaction()) {
    (void)connection_->Execute("ROLLBACK");
  }
}

absl::Status Transaction::Commit() {
  if (connection_ == nullptr) {
    return absl::FailedPreconditionError("transaction already finished");
  }
  absl::Status status = connection_->Execute("COMMIT");
  if (status.ok()) {
    connection_ = nullptr;
  }
  return status;
}

}  // namespace abox::store
