#include "src/store/migrations.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/store/test_util.h"

namespace abox::store {
namespace {

using testing::ExecOrDie;
using ::testing::HasSubstr;
using testing::OpenDatabaseOrDie;
using testing::QueryInt;
using testing::TempDir;

int64_t TableCount(Database& db, const std::string& name) {
  return QueryInt(
      db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = '" + name + "'");
}

TEST(MigrationsTest, SchemaMigrationsAreNumberedFromOne) {
  auto migrations = SchemaMigrations();
  ASSERT_FALSE(migrations.empty());
  for (size_t i = 0; i < migrations.size(); ++i) {
    EXPECT_EQ(migrations[i].version, static_cast<int>(i) + 1);
    EXPECT_NE(std::string(migrations[i].description), "");
  }
  EXPECT_EQ(LatestSchemaVersion(), static_cast<int>(migrations.size()));
}

TEST(MigrationsTest, MigratesAnEmptyDatabaseToTheLatestSchema) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(*SchemaVersion(*db), 0);
  ASSERT_TRUE(Migrate(*db).ok());
  EXPECT_EQ(*SchemaVersion(*db), LatestSchemaVersion());
  for (const char* table : {"sandboxes", "execs", "exec_output", "events"}) {
    EXPECT_EQ(TableCount(*db, table), 1) << table;
  }
  // The schema passes SQLite's own consistency check.
  EXPECT_EQ(
      QueryInt(*db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
}

TEST(MigrationsTest, ReopeningAMigratedDatabaseIsANoOp) {
  TempDir tmp;
  std::string path = tmp.file("state.db");
  {
    auto db = OpenStateDatabase(path);
    ASSERT_TRUE(db.ok()) << db.status();
    ExecOrDie(**db,
              "INSERT INTO sandboxes (id, image, cpus, memory_mib, state, created_at) "
              "VALUES ('0123456789ab', 'default', 1, 512, 'ready', 1)");
  }
  auto db = OpenStateDatabase(path);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(*SchemaVersion(**db), LatestSchemaVersion());
  EXPECT_EQ(QueryInt(**db, "SELECT count(*) FROM sandboxes"), 1);
  ASSERT_TRUE(Migrate(**db).ok());
  EXPECT_EQ(QueryInt(**db, "SELECT count(*) FROM sandboxes"), 1);
}

// A database written before per-sandbox retention (schema 2) keeps its rows, and its counts
// of kept rows start from what is there, so the next insert prunes to the cap at once.
TEST(MigrationsTest, RetentionCountersStartFromTheRowsAnOlderDatabaseHolds) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(ApplyMigrations(*db, SchemaMigrations().first(2)).ok());
  ExecOrDie(*db,
            "INSERT INTO sandboxes (id, image, cpus, memory_mib, state, created_at) "
            "VALUES ('0123456789ab', 'default', 1, 512, 'ready', 0)");
  for (int i = 0; i < 5; ++i) {
    ExecOrDie(*db,
              "INSERT INTO egress_connections (sandbox_id, time, kind, port, verdict) "
              "VALUES ('0123456789ab', 0, 'tls', 443, 'denied')");
    ExecOrDie(*db, "INSERT INTO events (time, sandbox_id, type) VALUES (0, '0123456789ab', 'x')");
  }
  ExecOrDie(*db, "INSERT INTO events (time, sandbox_id, type) VALUES (0, NULL, 'daemon')");
  ASSERT_TRUE(Migrate(*db).ok());
  EXPECT_EQ(*SchemaVersion(*db), LatestSchemaVersion());
  EXPECT_EQ(QueryInt(*db,
                     "SELECT connections_kept FROM retention_counters "
                     "WHERE sandbox_id = '0123456789ab'"),
            5);
  EXPECT_EQ(QueryInt(*db,
                     "SELECT events_kept FROM retention_counters "
                     "WHERE sandbox_id = '0123456789ab'"),
            5);
  EXPECT_EQ(QueryInt(*db, "SELECT events_kept FROM retention_counters WHERE sandbox_id = ''"), 1);
  EXPECT_EQ(QueryInt(*db, "SELECT count(*) FROM egress_connections"), 5);
}

// Schema 4 rebuilds `sandboxes` (a sandbox may be paused): the rows of every table that
// references it survive (no cascade from the drop), and references still hold.
TEST(MigrationsTest, PausedStateMigrationKeepsEveryRowThatReferencesASandbox) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(ApplyMigrations(*db, SchemaMigrations().first(3)).ok());
  ExecOrDie(*db,
            "INSERT INTO sandboxes (id, name, image, cpus, memory_mib, state, created_at) "
            "VALUES ('0123456789ab', 'keep', 'default', 2, 1024, 'ready', 7)");
  ExecOrDie(*db,
            "INSERT INTO execs (id, sandbox_id, state, started_at) "
            "VALUES ('e1', '0123456789ab', 'exited', 1)");
  ExecOrDie(*db,
            "INSERT INTO egress_connections (sandbox_id, time, kind, port, verdict) "
            "VALUES ('0123456789ab', 0, 'tls', 443, 'denied')");
  EXPECT_FALSE(
      db->Lock().Execute("UPDATE sandboxes SET state = 'paused' WHERE id = '0123456789ab'").ok());
  ASSERT_TRUE(Migrate(*db).ok());
  EXPECT_EQ(*SchemaVersion(*db), LatestSchemaVersion());
  EXPECT_EQ(QueryInt(*db, "SELECT count(*) FROM execs"), 1);
  EXPECT_EQ(QueryInt(*db, "SELECT count(*) FROM egress_connections"), 1);
  EXPECT_EQ(QueryInt(*db, "SELECT memory_mib FROM sandboxes WHERE name = 'keep'"), 1024);
  ExecOrDie(*db, "UPDATE sandboxes SET state = 'paused' WHERE id = '0123456789ab'");
  EXPECT_EQ(QueryInt(*db, "SELECT count(*) FROM sandboxes WHERE state = 'paused'"), 1);
  EXPECT_FALSE(
      db->Lock().Execute("UPDATE sandboxes SET state = 'asleep' WHERE id = '0123456789ab'").ok());
  // Foreign keys are on again and point at the new table: removing the sandbox cascades.
  EXPECT_EQ(QueryInt(*db, "PRAGMA foreign_keys"), 1);
  ExecOrDie(*db, "DELETE FROM sandboxes WHERE id = '0123456789ab'");
  EXPECT_EQ(QueryInt(*db, "SELECT count(*) FROM execs"), 0);
  EXPECT_EQ(QueryInt(*db, "SELECT count(*) FROM egress_connections"), 0);
  EXPECT_EQ(
      QueryInt(*db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
}

TEST(MigrationsTest, AppliesOnlyTheNewMigrations) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  const std::vector<Migration> v1 = {{1, "a", "CREATE TABLE a (x INTEGER)"}};
  ASSERT_TRUE(ApplyMigrations(*db, v1).ok());
  ExecOrDie(*db, "INSERT INTO a VALUES (1)");
  const std::vector<Migration> v2 = {{1, "a", "CREATE TABLE a (x INTEGER)"},
                                     {2, "b", "ALTER TABLE a ADD COLUMN y INTEGER DEFAULT 7"}};
  ASSERT_TRUE(ApplyMigrations(*db, v2).ok());
  EXPECT_EQ(*SchemaVersion(*db), 2);
  EXPECT_EQ(QueryInt(*db, "SELECT x + y FROM a"), 8);
}

TEST(MigrationsTest, AFailingMigrationRollsBackAndNamesItself) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  const std::vector<Migration> migrations = {
      {1, "first", "CREATE TABLE a (x INTEGER)"},
      {2, "broken", "CREATE TABLE b (x INTEGER); INSERT INTO missing VALUES (1)"},
  };
  absl::Status status = ApplyMigrations(*db, migrations);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("schema migration 2 (broken) failed"));
  EXPECT_THAT(status.message(), HasSubstr("no such table: missing"));
  EXPECT_EQ(*SchemaVersion(*db), 1);
  EXPECT_EQ(TableCount(*db, "a"), 1);
  EXPECT_EQ(TableCount(*db, "b"), 0);  // the half-applied step left nothing behind
  Connection connection = db->Lock();
  EXPECT_FALSE(connection.InTransaction());
}

// Schema 8 gives sandboxes a disk size: those from before had the image's (0).
TEST(MigrationsTest, SandboxesFromBeforeDiskSizesHaveTheImagesSize) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(ApplyMigrations(*db, SchemaMigrations().first(7)).ok());
  ExecOrDie(*db,
            "INSERT INTO sandboxes (id, image, cpus, memory_mib, state, created_at) "
            "VALUES ('0123456789ab', 'default', 1, 512, 'ready', 1)");
  ASSERT_TRUE(Migrate(*db).ok());
  EXPECT_EQ(QueryInt(*db, "SELECT disk_mib FROM sandboxes WHERE id = '0123456789ab'"), 0);
  EXPECT_FALSE(
      db->Lock().Execute("UPDATE sandboxes SET disk_mib = -1 WHERE id = '0123456789ab'").ok());
}

// Schema 9 adds each exec's OOM kills: execs recorded before it had none.
TEST(MigrationsTest, ExecsFromBeforeOomCountingHaveNoOomKills) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(ApplyMigrations(*db, SchemaMigrations().first(7)).ok());
  ExecOrDie(*db,
            "INSERT INTO sandboxes (id, image, cpus, memory_mib, state, created_at) "
            "VALUES ('0123456789ab', 'default', 1, 512, 'ready', 1)");
  ExecOrDie(*db,
            "INSERT INTO execs (id, sandbox_id, state, signal, started_at) "
            "VALUES ('e1', '0123456789ab', 'exited', 9, 1)");
  ASSERT_TRUE(Migrate(*db).ok());
  EXPECT_EQ(QueryInt(*db, "SELECT oom_kills FROM execs WHERE id = 'e1'"), 0);
  EXPECT_FALSE(db->Lock().Execute("UPDATE execs SET oom_kills = -1 WHERE id = 'e1'").ok());
}

TEST(MigrationsTest, ADatabaseFromANewerAboxIsRefused) {
  TempDir tmp;
  std::string path = tmp.file("state.db");
  {
    auto db = OpenDatabaseOrDie(path);
    ASSERT_NE(db, nullptr);
    ExecOrDie(*db, "PRAGMA user_version = 99");
  }
  auto db = OpenStateDatabase(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(db.status().message(),
              HasSubstr("state.db was written by a newer abox (schema 99 > " +
                        std::to_string(LatestSchemaVersion()) + ")"));
  EXPECT_THAT(db.status().message(), HasSubstr("upgrade abox"));
}

TEST(MigrationsTest, MisnumberedMigrationsAreRejected) {
  TempDir tmp;
  auto db = OpenDatabaseOrDie(tmp.file("state.db"));
  ASSERT_NE(db, nullptr);
  const std::vector<Migration> gap = {{1, "a", "SELECT 1"}, {3, "c", "SELECT 1"}};
  absl::Status status = ApplyMigrations(*db, gap);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("has version 3, want 2"));
  EXPECT_EQ(*SchemaVersion(*db), 0);
}

TEST(MigrationsTest, ASecondConnectionFindsTheWorkDone) {
  TempDir tmp;
  std::string path = tmp.file("state.db");
  auto first = OpenDatabaseOrDie(path);
  auto second = OpenDatabaseOrDie(path);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  // A migration that is not idempotent would fail the second time.
  const std::vector<Migration> migrations = {{1, "a", "CREATE TABLE a (x INTEGER)"}};
  ASSERT_TRUE(ApplyMigrations(*first, migrations).ok());
  ASSERT_TRUE(ApplyMigrations(*second, migrations).ok());
  EXPECT_EQ(*SchemaVersion(*second), 1);
}

}  // namespace
}  // namespace abox::store
