#include "src/store/database.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/store/test_util.h"

namespace abox::store {
namespace {

using testing::ExecOrDie;
using ::testing::HasSubstr;
using testing::OpenDatabaseOrDie;
using testing::QueryInt;
using testing::TempDir;

int ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return static_cast<int>(st.st_mode & 07777);
}

std::string QueryText(Database& db, const std::string& sql) {
  Connection connection = db.Lock();
  auto stmt = connection.Prepare(sql);
  EXPECT_TRUE(stmt.ok()) << stmt.status();
  if (!stmt.ok()) {
    return "";
  }
  auto row = stmt->Step();
  EXPECT_TRUE(row.ok() && *row) << sql;
  return stmt->ColumnText(0);
}

TEST(DatabaseTest, OpenCreatesFile0600AndMissingParents0700) {
  TempDir tmp;
  std::string path = tmp.file("a/b/state.db");
  auto db = OpenDatabaseOrDie(path);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->path(), path);
  EXPECT_EQ(ModeOf(path), 0600);
  EXPECT_EQ(ModeOf(tmp.file("a")), 0700);
  EXPECT_EQ(ModeOf(tmp.file("a/b")), 0700);
  // SQLite gives the write-ahead log and shared-memory files the database's mode.
  ExecOrDie(*db, "CREATE TABLE t (x INTEGER)");
  EXPECT_EQ(ModeOf(path + "-wal"), 0600);
  EXPECT_EQ(ModeOf(path + "-shm"), 0600);
}

TEST(DatabaseTest, OpenTightensAnExistingLooseFile) {
  TempDir tmp;
  std::string path = tmp.file("state.db");
  ASSERT_TRUE(base::WriteFileAtomic(path, "", 0644).ok());
  auto db = OpenDatabaseOrDie(path);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(ModeOf(path), 0600);
}

TEST(DatabaseTest, PragmasAreSet) {
  TempDir tmp;
  DatabaseOptions options;
  options.busy_timeout = absl::Milliseconds(1234);
  auto db = OpenDatabaseOrDie(tmp.file("state.db"), options);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(QueryText(*db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(QueryInt(*db, "PRAGMA foreign_keys"), 1);
  EXPECT_EQ(QueryInt(*db, "PRAGMA synchronous"), 1);  // NORMAL
  EXPECT_EQ(QueryInt(*db, "PRAGMA busy_timeout"), 1234);
}

TEST(DatabaseTest, WalModeIsPersistentInTheFile) {
  TempDir tmp;
  std::string path = tmp.file("state.db");
  OpenDatabaseOrDie(path).reset();
  // Bytes 18 and 19 of the header are 2 for WAL (1 for rollback journal).
  auto header = base::ReadFile(path);
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_GE(header->size(), 20u);
  EXPECT_EQ((*header)[18], 2);
  EXPECT_EQ((*header)[19], 2);
}

TEST(DatabaseTest, OpenRefusesASymlink) {
  TempDir tmp;
  std::string target = tmp.file("real.db");
  std::string link = tmp.file("state.db");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  auto db = Database::Open(link);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(db.status().message(), HasSubstr("symbolic link"));
  EXPECT_FALSE(std::filesystem::exists(target));
}

TEST(DatabaseTest, OpenUnderAFileNamesThePath) {
  TempDir tmp;
  ASSERT_TRUE(base::WriteFileAtomic(tmp.file("plain"), "x").ok());
  std::string path = tmp.file("plain/state.db");
  auto db = Database::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(db.status().message(), HasSubstr(path));
  EXPECT_THAT(db.status().message(), HasSubstr("open("));
}

TEST(DatabaseTest, OpenEmptyPathIsInvalid) {
  EXPECT_EQ(Database::Open("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DatabaseTest, CorruptFileIsDataLossWithAdvice) {
  TempDir tmp;
  std::string path = tmp.file("state.db");
  ASSERT_TRUE(base::WriteFileAtomic(path, std::string(8192, 'Z'), 0600).ok());
  auto db = Database::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(db.status().message(), HasSubstr("cannot open state database " + path));
  EXPECT_THAT(db.status().message(), HasSubstr("file is not a database"));
  EXPECT_THAT(db.status().message(), HasSubstr("Move it aside"));
}

TEST(DatabaseTest, DamagedPagesAreDataLoss) {
  TempDir tmp;
  std::string path = tmp.file("state.db");
  {
    auto db = OpenDatabaseOrDie(path);
    ASSERT_NE(db, nullptr);
    ExecOrDie(*db, "CREATE TABLE t (x TEXT)");
    ExecOrDie(*db,
              "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) "
              "INSERT INTO t SELECT printf('%0200d', i) FROM n");
    ExecOrDie(*db, "PRAGMA wal_checkpoint(TRUNCATE)");
  }
  auto bytes = base::ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  ASSERT_GT(bytes->size(), 3 * 4096u);
  // Keep page 1 (the header and schema); scribble over everything after it.
  std::string damaged = bytes->substr(0, 4096) + std::string(bytes->size() - 4096, '\xA5');
  ASSERT_TRUE(base::WriteFileAtomic(path, damaged, 0600).ok());

  auto db = OpenDatabaseOrDie(path);
  ASSERT_NE(db, nullptr);
  Connection connection = db->Lock();
  auto stmt = connection.Prepare("SELECT count(*), max(x) FROM t");
  ASSERT_TRUE(stmt.ok()) << stmt.status();
  auto row = stmt->Step();
  ASSERT_FALSE(row.ok());
  EXPECT_EQ(row.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(row.status().message(), HasSubstr("malformed"));
}

TEST(DatabaseTest, PrepareErrorNamesTheStatementAndSqliteMessage) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  Connection connection = db->Lock();
  auto stmt = connection.Prepare("SELEC 1");
  ASSERT_FALSE(stmt.ok());
  EXPECT_EQ(stmt.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(stmt.status().message(), HasSubstr("SQLite prepare failed for 'SELEC 1'"));
  EXPECT_THAT(stmt.status().message(), HasSubstr("syntax error"));

  auto missing = connection.Prepare("SELECT * FROM nowhere");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no such table: nowhere"));
}

TEST(DatabaseTest, PrepareRefusesSeveralStatementsAndEmptyText) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  Connection connection = db->Lock();
  auto two = connection.Prepare("SELECT 1; SELECT 2");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(connection.Prepare("SELECT 1;  \n").ok());
  EXPECT_EQ(connection.Prepare("  ").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DatabaseTest, BindsByIndexAndNameAndReadsEveryType) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  ExecOrDie(*db, "CREATE TABLE t (i INTEGER, d REAL, s TEXT, b BLOB, n INTEGER, e TEXT)");
  Connection connection = db->Lock();
  auto insert = connection.Prepare("INSERT INTO t VALUES (?1, :d, :s, ?4, :n, :e)");
  ASSERT_TRUE(insert.ok()) << insert.status();
  const std::string blob("a\0b\xff", 4);
  ASSERT_TRUE(insert->BindInt64(1, INT64_MIN).ok());
  ASSERT_TRUE(insert->BindDouble(":d", 2.5).ok());
  ASSERT_TRUE(insert->BindText(":s", "h\xC3\xA9llo").ok());
  ASSERT_TRUE(insert->BindBlob(4, blob).ok());
  ASSERT_TRUE(insert->BindOptionalInt64(":n", std::nullopt).ok());
  ASSERT_TRUE(insert->BindText(":e", absl::string_view()).ok());  // empty, not NULL
  ASSERT_TRUE(insert->Run().ok());
  EXPECT_EQ(connection.ChangedRows(), 1);

  auto select = connection.Prepare("SELECT i, d, s, b, n, e, typeof(e) FROM t");
  ASSERT_TRUE(select.ok()) << select.status();
  auto row = select->Step();
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(select->ColumnCount(), 7);
  EXPECT_EQ(select->ColumnInt64(0), INT64_MIN);
  EXPECT_EQ(select->ColumnDouble(1), 2.5);
  EXPECT_EQ(select->ColumnText(2), "h\xC3\xA9llo");
  EXPECT_EQ(select->ColumnBlob(3), blob);
  EXPECT_TRUE(select->ColumnIsNull(4));
  EXPECT_EQ(select->ColumnOptionalInt64(4), std::nullopt);
  EXPECT_EQ(select->ColumnOptionalInt64(0), INT64_MIN);
  EXPECT_FALSE(select->ColumnIsNull(5));
  EXPECT_EQ(select->ColumnText(6), "text");
  row = select->Step();
  ASSERT_TRUE(row.ok());
  EXPECT_FALSE(*row);
}

TEST(DatabaseTest, BindingAnUnknownParameterIsInvalidArgument) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  Connection connection = db->Lock();
  auto stmt = connection.Prepare("SELECT :a");
  ASSERT_TRUE(stmt.ok());
  absl::Status by_name = stmt->BindInt64(":b", 1);
  EXPECT_EQ(by_name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(by_name.message(), HasSubstr("no parameter :b in 'SELECT :a'"));
  EXPECT_EQ(stmt->BindInt64(2, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stmt->BindInt64(0, 1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DatabaseTest, ResetRunsAgainWithFreshBindings) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  Connection connection = db->Lock();
  auto stmt = connection.Prepare("SELECT ?");
  ASSERT_TRUE(stmt.ok());
  ASSERT_TRUE(stmt->BindInt64(1, 7).ok());
  ASSERT_TRUE(*stmt->Step());
  EXPECT_EQ(stmt->ColumnInt64(0), 7);
  stmt->Reset();
  ASSERT_TRUE(*stmt->Step());
  EXPECT_TRUE(stmt->ColumnIsNull(0));  // bindings cleared
}

TEST(DatabaseTest, ConstraintViolationsMapToStatusCodes) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  ExecOrDie(*db,
            "CREATE TABLE p (id INTEGER PRIMARY KEY, u TEXT UNIQUE, c INTEGER CHECK (c > 0));"
            "CREATE TABLE k (p INTEGER REFERENCES p (id));"
            "INSERT INTO p VALUES (1, 'x', 1)");
  Connection connection = db->Lock();
  absl::Status unique = connection.Execute("INSERT INTO p VALUES (2, 'x', 1)");
  EXPECT_EQ(unique.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(unique.message(), HasSubstr("UNIQUE constraint failed: p.u"));
  EXPECT_THAT(unique.message(), HasSubstr("INSERT INTO p VALUES (2, 'x', 1)"));
  EXPECT_EQ(connection.Execute("INSERT INTO p VALUES (1, 'y', 1)").code(),
            absl::StatusCode::kAlreadyExists);
  absl::Status check = connection.Execute("INSERT INTO p VALUES (3, 'z', 0)");
  EXPECT_EQ(check.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(check.message(), HasSubstr("CHECK constraint failed"));
  absl::Status fk = connection.Execute("INSERT INTO k VALUES (42)");
  EXPECT_EQ(fk.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(fk.message(), HasSubstr("FOREIGN KEY constraint failed"));
}

TEST(DatabaseTest, TransactionRollsBackUnlessCommitted) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  ExecOrDie(*db, "CREATE TABLE t (x INTEGER)");
  {
    Connection connection = db->Lock();
    auto transaction = Transaction::Begin(connection);
    ASSERT_TRUE(transaction.ok()) << transaction.status();
    ASSERT_TRUE(connection.Execute("INSERT INTO t VALUES (1)").ok());
    EXPECT_TRUE(connection.InTransaction());
  }
  EXPECT_EQ(QueryInt(*db, "SELECT count(*) FROM t"), 0);
  {
    Connection connection = db->Lock();
    auto transaction = Transaction::Begin(connection, Transaction::Mode::kDeferred);
    ASSERT_TRUE(transaction.ok());
    ASSERT_TRUE(connection.Execute("INSERT INTO t VALUES (2)").ok());
    Transaction moved = std::move(*transaction);
    ASSERT_TRUE(moved.Commit().ok());
    EXPECT_FALSE(connection.InTransaction());
    EXPECT_EQ(moved.Commit().code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(QueryInt(*db, "SELECT count(*) FROM t"), 1);
}

TEST(DatabaseTest, TransactionsDoNotNest) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  Connection connection = db->Lock();
  auto outer = Transaction::Begin(connection);
  ASSERT_TRUE(outer.ok());
  auto inner = Transaction::Begin(connection);
  ASSERT_FALSE(inner.ok());
  EXPECT_THAT(inner.status().message(), HasSubstr("within a transaction"));
  EXPECT_TRUE(connection.InTransaction());  // the outer one is untouched
}

TEST(DatabaseTest, TwoConnectionsSeeEachOthersCommittedWrites) {
  TempDir tmp;
  std::string path = tmp.file("state.db");
  auto first = OpenDatabaseOrDie(path);
  auto second = OpenDatabaseOrDie(path);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ExecOrDie(*first, "CREATE TABLE t (x INTEGER)");
  ExecOrDie(*first, "INSERT INTO t VALUES (1)");
  EXPECT_EQ(QueryInt(*second, "SELECT sum(x) FROM t"), 1);
  {
    // Uncommitted writes stay invisible to the other connection.
    Connection connection = second->Lock();
    auto transaction = Transaction::Begin(connection);
    ASSERT_TRUE(transaction.ok());
    ASSERT_TRUE(connection.Execute("INSERT INTO t VALUES (10)").ok());
    EXPECT_EQ(QueryInt(*first, "SELECT sum(x) FROM t"), 1);
    ASSERT_TRUE(transaction->Commit().ok());
  }
  EXPECT_EQ(QueryInt(*first, "SELECT sum(x) FROM t"), 11);
}

TEST(DatabaseTest, WriterBlockedByAnotherConnectionIsUnavailable) {
  TempDir tmp;
  std::string path = tmp.file("state.db");
  auto holder = OpenDatabaseOrDie(path);
  DatabaseOptions impatient;
  impatient.busy_timeout = absl::ZeroDuration();
  auto waiter = OpenDatabaseOrDie(path, impatient);
  ASSERT_NE(holder, nullptr);
  ASSERT_NE(waiter, nullptr);
  ExecOrDie(*holder, "CREATE TABLE t (x INTEGER)");

  Connection held = holder->Lock();
  auto transaction = Transaction::Begin(held);
  ASSERT_TRUE(transaction.ok());
  {
    Connection connection = waiter->Lock();
    auto blocked = Transaction::Begin(connection);
    ASSERT_FALSE(blocked.ok());
    EXPECT_EQ(blocked.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(blocked.status().message(), HasSubstr("database is locked"));
    // Readers are not blocked by a writer in WAL mode.
    auto read = connection.Prepare("SELECT count(*) FROM t");
    ASSERT_TRUE(read.ok());
    EXPECT_TRUE(read->Step().ok());
  }
  ASSERT_TRUE(transaction->Commit().ok());
  Connection connection = waiter->Lock();
  EXPECT_TRUE(connection.Execute("INSERT INTO t VALUES (1)").ok());
}

// Another process writing a new database file that is still in rollback-journal mode, as the
// first aboxd does while it creates state.db: a plain SQLite connection in a write transaction.
class RollbackModeWriter final {
 public:
  explicit RollbackModeWriter(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    Exec("CREATE TABLE t (x INTEGER); BEGIN IMMEDIATE; INSERT INTO t VALUES (1)");
  }
  ~RollbackModeWriter() { sqlite3_close(db_); }
  RollbackModeWriter(const RollbackModeWriter&) = delete;
  RollbackModeWriter& operator=(const RollbackModeWriter&) = delete;

  void Exec(const char* sql) { EXPECT_EQ(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), 0); }

 private:
  sqlite3* db_ = nullptr;
};

// Regression test: SQLite refuses the switch to WAL at once (SQLITE_BUSY, "database is
// locked") while another connection writes, whatever busy_timeout says; two aboxds starting at
// once failed so. Open tries again until the writer is done.
TEST(DatabaseTest, OpenWaitsForAWriterBeforeSwitchingToWal) {
  TempDir tmp;
  std::string path = tmp.file("state.db");
  RollbackModeWriter writer(path);
  std::thread commit([&writer] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    writer.Exec("COMMIT");
  });
  auto db = Database::Open(path);
  commit.join();
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(QueryText(**db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(QueryInt(**db, "SELECT count(*) FROM t"), 1);
}

TEST(DatabaseTest, OpenGivesUpAfterTheBusyTimeoutAndSaysWhatToDo) {
  TempDir tmp;
  std::string path = tmp.file("state.db");
  RollbackModeWriter writer(path);
  DatabaseOptions options;
  options.busy_timeout = absl::Milliseconds(100);
  auto db = Database::Open(path, options);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(db.status().message(), HasSubstr("database is locked"));
  EXPECT_THAT(db.status().message(), HasSubstr("fuser " + path));
  writer.Exec("ROLLBACK");
}

TEST(DatabaseTest, RetryWhileBusyRunsTheStepAgainOnlyWhileItIsUnavailable) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  int calls = 0;
  absl::Status status = db->RetryWhileBusy([&calls] {
    return ++calls < 3 ? absl::UnavailableError("database is locked") : absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(calls, 3);

  calls = 0;
  status = db->RetryWhileBusy([&calls] {
    ++calls;
    return absl::DataLossError("file is not a database");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(calls, 1);
}

TEST(DatabaseTest, RetryWhileBusyGivesUpAfterTheBusyTimeout) {
  TempDir tmp;
  DatabaseOptions options;
  options.busy_timeout = absl::Milliseconds(50);
  auto db = OpenDatabaseOrDie(tmp.file("state.db"), options);
  ASSERT_NE(db, nullptr);
  absl::Status status =
      db->RetryWhileBusy([] { return absl::UnavailableError("database is locked"); });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
}

TEST(DatabaseTest, ThreadsShareOneDatabaseSafely) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  ExecOrDie(*db, "CREATE TABLE t (x INTEGER)");
  constexpr int kThreads = 4;
  constexpr int kRows = 50;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&db, t] {
      for (int i = 0; i < kRows; ++i) {
        Connection connection = db->Lock();
        auto transaction = Transaction::Begin(connection);
        ASSERT_TRUE(transaction.ok());
        auto stmt = connection.Prepare("INSERT INTO t VALUES (?)");
        ASSERT_TRUE(stmt.ok());
        ASSERT_TRUE(stmt->BindInt64(1, t * kRows + i).ok());
        ASSERT_TRUE(stmt->Run().ok());
        ASSERT_TRUE(transaction->Commit().ok());
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(QueryInt(*db, "SELECT count(DISTINCT x) FROM t"), kThreads * kRows);
}

}  // namespace
}  // namespace abox::store

namespace abox::store {
namespace {

// Statements are cached by SQL text: a reused one starts over, with its bindings cleared, and
// two live statements with the same text do not share state.
TEST(DatabaseStatementCacheTest, ReusedStatementsStartFresh) {
  testing::TempDir dir;
  auto db = Database::Open(dir.file("cache.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  Connection c = (*db)->Lock();
  ASSERT_TRUE(c.Execute("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1), (2), (3)").ok());
  const char* kSql = "SELECT v FROM t WHERE v >= coalesce(?, 0) ORDER BY v";
  {
    auto first = c.Prepare(kSql);
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE(first->BindInt64(1, 2).ok());
    ASSERT_TRUE(*first->Step());
    EXPECT_EQ(first->ColumnInt64(0), 2);
    // The same text while the first is alive: a separate statement.
    auto twin = c.Prepare(kSql);
    ASSERT_TRUE(twin.ok());
    ASSERT_TRUE(*twin->Step());
    EXPECT_EQ(twin->ColumnInt64(0), 1);
    ASSERT_TRUE(*first->Step());
    EXPECT_EQ(first->ColumnInt64(0), 3);
  }  // both go back: one cached, one finalized
  auto again = c.Prepare(kSql);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(*again->Step());  // no binding left over: NULL -> 0 -> all rows
  EXPECT_EQ(again->ColumnInt64(0), 1);
}

}  // namespace
}  // namespace abox::store
