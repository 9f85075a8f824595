// Test-only helpers shared by the store tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "src/store/database.h"
#include "src/store/migrations.h"

namespace abox::store::testing {

// A fresh directory under $TEST_TMPDIR (or /tmp), removed with everything in it at scope exit.
class TempDir final {
 public:
  TempDir() {
    const char* base = ::getenv("TEST_TMPDIR");  // NOLINT(concurrency-mt-unsafe)
    std::string templ = std::string(base != nullptr ? base : "/tmp") + "/abox-store-test-XXXXXX";
    EXPECT_NE(::mkdtemp(templ.data()), nullptr);
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A clock that moves only when told to.
class FakeClock final {
 public:
  [[nodiscard]] Clock AsClock() {
    return [this] { return now_; };
  }
  void Advance(absl::Duration d) { now_ += d; }
  [[nodiscard]] absl::Time now() const { return now_; }

 private:
  absl::Time now_ = absl::FromUnixMillis(1'700'000'000'123);
};

// Database::Open; fails the test (and returns null) on error.
inline std::unique_ptr<Database> OpenDatabaseOrDie(
    const std::string& path, const DatabaseOptions& options = DatabaseOptions()) {
  auto db = Database::Open(path, options);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? std::move(*db) : nullptr;
}

// A migrated state database at `path`; fails the test (and returns null) on error.
inline std::unique_ptr<Database> OpenStateOrDie(const std::string& path) {
  auto db = OpenStateDatabase(path);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? std::move(*db) : nullptr;
}

// Runs one query returning a single integer (e.g. "SELECT count(*) FROM execs").
inline int64_t QueryInt(Database& db, const std::string& sql) {
  Connection connection = db.Lock();
  auto stmt = connection.Prepare(sql);
  EXPECT_TRUE(stmt.ok()) << stmt.status();
  if (!stmt.ok()) {
    return -1;
  }
  auto row = stmt->Step();
  EXPECT_TRUE(row.ok() && *row) << sql;
  return stmt->ColumnInt64(0);
}

inline void ExecOrDie(Database& db, const std::string& sql) {
  Connection connection = db.Lock();
  absl::Status status = connection.Execute(sql);
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace abox::store::testing
