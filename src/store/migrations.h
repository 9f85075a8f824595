// The state database's schema as an ordered list of migrations, and the code that applies them.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/store/database.h"

namespace abox::store {

// One schema step. Versions start at 1 and go up by one; `sql` may hold several statements.
// A released migration is never edited: changes go into a new one.
struct Migration {
  int version;
  const char* description;
  const char* sql;
  // The migration rebuilds a table others reference (SQLite cannot change a CHECK in place):
  // foreign keys are off while it runs (else dropping the old table would cascade into its
  // children), and checked before it commits.
  bool rebuilds_tables = false;
};

// abox's schema, oldest first.
[[nodiscard]] std::span<const Migration> SchemaMigrations();
// The schema version this code writes (the last migration's).
[[nodiscard]] int LatestSchemaVersion();

// The schema version recorded in the database (PRAGMA user_version; 0 for a new file).
[[nodiscard]] absl::StatusOr<int> SchemaVersion(Database& db);

// Applies the migrations of `migrations` that are newer than the database, each in its own
// IMMEDIATE transaction together with the version bump, so a failing migration leaves the
// database at the previous version. A database newer than the last migration fails with
// kFailedPrecondition ("state.db was written by a newer abox (schema N > M)"). Concurrent
// callers on other connections are safe: each step re-reads the version under the write lock,
// and is tried again while another connection holds the database (Database::RetryWhileBusy).
[[nodiscard]] absl::Status ApplyMigrations(Database& db, std::span<const Migration> migrations);

// ApplyMigrations(db, SchemaMigrations()).
[[nodiscard]] absl::Status Migrate(Database& db);

// Database::Open + Migrate: what aboxd calls at start.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Database>> OpenStateDatabase(
    const std::string& path, const DatabaseOptions& options = DatabaseOptions());

}  // namespace abox::store
