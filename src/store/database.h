// aboxd's SQLite connection: opening (file modes, WAL, pragmas), exclusive use, transactions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/store/statement.h"

struct sqlite3;
struct sqlite3_stmt;

namespace abox::store {

// Where the repositories get "now" from; tests inject a fake.
using Clock = std::function<absl::Time()>;

struct DatabaseOptions {
  // How long a statement waits for another connection's lock before failing with kUnavailable;
  // at open, also how long the journal-mode switch and the migrations are retried.
  absl::Duration busy_timeout = absl::Seconds(5);
};

class Connection;

// Owns one SQLite connection to a database file.
//
// Open() creates the file with mode 0600 (and missing parent directories 0700; SQLite gives its
// -wal and -shm files the same mode), refuses symlinks, and sets journal_mode=WAL,
// foreign_keys=ON, synchronous=NORMAL (durable at checkpoints, never corrupt) and busy_timeout.
// Other processes may open the same file: WAL lets readers run beside one writer, and writers
// wait up to busy_timeout for each other. Opening retries the switch to WAL while another
// connection holds the file (SQLite refuses it at once then, whatever busy_timeout says).
//
// Thread safety: thread-safe. The connection is guarded by a mutex; Lock() hands out exclusive
// use for the lifetime of the returned Connection. The mutex is not reentrant: code holding a
// Connection must not call anything that locks the same Database again.
class Database final {
 public:
  // Opens (creating if needed) the database at `path`. A file that is not a SQLite database
  // fails with kDataLoss and says to move it aside.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Database>> Open(
      const std::string& path, const DatabaseOptions& options);
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path) {
    return Open(path, DatabaseOptions());
  }

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  [[nodiscard]] const std::string& path() const { return path_; }

  // Exclusive use of the connection until the returned Connection is destroyed. Blocks while
  // another thread holds it.
  [[nodiscard]] Connection Lock();

  // Runs `step`, and again while it fails with kUnavailable (SQLITE_BUSY / SQLITE_LOCKED),
  // until busy_timeout has passed since the first try; returns its last status. For what
  // SQLite's busy handler does not wait in: a journal-mode change, or a transaction that needs
  // a write lock while it holds a read lock, fails at once when another connection writes
  // (SQLite refuses rather than risk a deadlock). `step` takes the connection itself (Lock())
  // and must leave nothing behind when it fails, e.g. run one transaction.
  [[nodiscard]] absl::Status RetryWhileBusy(const std::function<absl::Status()>& step);

 private:
  friend class Connection;
  Database(sqlite3* db, std::string path, absl::Duration busy_timeout)
      : db_(db), path_(std::move(path)), busy_timeout_(busy_timeout) {}

  absl::Mutex mu_;
  sqlite3* const db_;
  const std::string path_;
  const absl::Duration busy_timeout_;
  // Compiled statements kept for reuse, by SQL text (guarded by mu_: statements live inside a
  // Connection's scope). Parsing is a large part of a small query's cost.
  std::unordered_map<std::string, sqlite3_stmt*> statement_cache_;
};

// Exclusive use of a Database's connection (holds its mutex). Not movable: keep it in one scope
// and declare Statements and Transactions after it, so they are gone before it unlocks.
class Connection final {
 public:
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() = default;

  // Compiles one statement. Trailing text after the first statement is kInvalidArgument.
  [[nodiscard]] absl::StatusOr<Statement> Prepare(absl::string_view sql);
  // Runs one or more ';'-separated statements without parameters, discarding any rows.
  [[nodiscard]] absl::Status Execute(absl::string_view sql);
  // Rows changed by the most recent INSERT / UPDATE / DELETE.
  [[nodiscard]] int64_t ChangedRows();
  // True while a transaction is open.
  [[nodiscard]] bool InTransaction();
  [[nodiscard]] const std::string& path() const { return db_.path_; }

 private:
  friend class Database;
  explicit Connection(Database& db) : db_(db), lock_(&db.mu_) {}

  Database& db_;
  absl::MutexLock lock_;
};

// An open SQLite transaction: rolls back on destruction unless Commit() succeeded. Move-only;
// lives inside the scope of the Connection it was begun on. Transactions do not nest.
class Transaction final {
 public:
  // kImmediate takes the write lock at BEGIN (waiting up to busy_timeout), so a transaction
  // that reads then writes cannot fail halfway with SQLITE_BUSY. Use it for every write.
  enum class Mode { kDeferred, kImmediate };

  [[nodiscard]] static absl::StatusOr<Transaction> Begin(Connection& connection,
                                                         Mode mode = Mode::kImmediate);
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // Commits. On failure the transaction is rolled back (now, or at destruction).
  [[nodiscard]] absl::Status Commit();

 private:
  explicit Transaction(Connection& connection) : connection_(&connection) {}

  Connection* connection_;  // null once committed or moved from
};

}  // namespace abox::store
