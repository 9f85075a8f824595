#include "src/store/migrations.h"

#include <filesystem>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::store {
namespace {

// Times are integer milliseconds since the Unix epoch. STRICT tables make SQLite enforce the
// column types; CHECKs keep enumerations to the values the code knows.
constexpr char kSchemaV1[] = R"sql(
CREATE TABLE sandboxes (
  id TEXT PRIMARY KEY NOT NULL
      CHECK (length(id) = 12 AND id NOT GLOB '*[^0-9a-f]*'),
  name TEXT UNIQUE,                       -- NULL when unnamed
  image TEXT NOT NULL,
  cpus INTEGER NOT NULL CHECK (cpus > 0),
  memory_mib INTEGER NOT NULL CHECK (memory_mib > 0),
  labels TEXT NOT NULL DEFAULT '{}'       -- JSON object of strings
      CHECK (json_valid(labels) AND json_type(labels) = 'object'),
  state TEXT NOT NULL
      CHECK (state IN ('creating', 'ready', 'stopping', 'stopped', 'failed', 'removed')),
  failure TEXT NOT NULL DEFAULT '',
  run_dir TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  ready_at INTEGER,
  ttl_seconds INTEGER NOT NULL DEFAULT 0 CHECK (ttl_seconds >= 0),       -- 0: none
  idle_timeout_seconds INTEGER NOT NULL DEFAULT 0 CHECK (idle_timeout_seconds >= 0),
  last_active_at INTEGER,
  vmm_pid INTEGER,                        -- diagnostic only; pids are reused
  accel TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX sandboxes_by_state ON sandboxes (state);

CREATE TABLE execs (
  id TEXT PRIMARY KEY NOT NULL,
  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
  argv TEXT NOT NULL DEFAULT '[]',        -- JSON array of strings; empty when shell is set
  shell TEXT NOT NULL DEFAULT '',         -- a shell command line; empty when argv is set
  env TEXT NOT NULL DEFAULT '{}',         -- JSON object of strings
  cwd TEXT NOT NULL DEFAULT '',
  user TEXT NOT NULL DEFAULT '',
  pty INTEGER NOT NULL DEFAULT 0 CHECK (pty IN (0, 1)),
  timeout_ms INTEGER NOT NULL DEFAULT 0 CHECK (timeout_ms >= 0),          -- 0: none
  state TEXT NOT NULL CHECK (state IN ('running', 'exited', 'failed', 'interrupted')),
  exit_code INTEGER,
  signal INTEGER,
  timed_out INTEGER NOT NULL DEFAULT 0 CHECK (timed_out IN (0, 1)),
  error TEXT NOT NULL DEFAULT '',
  started_at INTEGER NOT NULL,
  finished_at INTEGER,
  output_bytes INTEGER NOT NULL DEFAULT 0,                -- bytes kept in exec_output
  output_truncated INTEGER NOT NULL DEFAULT 0 CHECK (output_truncated IN (0, 1))
) STRICT;
CREATE INDEX execs_by_sandbox ON execs (sandbox_id, started_at);
CREATE INDEX execs_by_state ON execs (state);

CREATE TABLE exec_output (
  exec_id TEXT NOT NULL REFERENCES execs (id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,                   -- 1, 2, ... per exec; oldest chunks are dropped
  stream TEXT NOT NULL CHECK (stream IN ('stdout', 'stderr')),
  data BLOB NOT NULL,
  PRIMARY KEY (exec_id, seq)
) STRICT;

-- No foreign key: a sandbox's events outlive it ("removed" is the last one).
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  time INTEGER NOT NULL,
  sandbox_id TEXT,                        -- NULL for daemon-wide events
  type TEXT NOT NULL,
  payload TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(payload))
) STRICT;
)sql";

// Egress (issue 5): policies (global + per sandbox), the connection and DNS logs (bounded per
// sandbox by the repository), "ask to allow" requests and the names taken out of the queue.
constexpr char kSchemaV2[] = R"sql(
CREATE TABLE egress_global_policy (
  id INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
  mode TEXT NOT NULL CHECK (mode IN ('none', 'allowlist', 'open')),
  allow TEXT NOT NULL DEFAULT '[]'        -- JSON array of rule texts (net::ParseRule)
      CHECK (json_valid(allow) AND json_type(allow) = 'array'),
  updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE egress_sandbox_policies (
  sandbox_id TEXT PRIMARY KEY NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
  mode TEXT CHECK (mode IS NULL OR mode IN ('none', 'allowlist', 'open')),  -- NULL: global's
  allow TEXT NOT NULL DEFAULT '[]'
      CHECK (json_valid(allow) AND json_type(allow) = 'array'),
  updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE egress_connections (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
  time INTEGER NOT NULL,                  -- when the connection started
  kind TEXT NOT NULL CHECK (kind IN ('unknown', 'tls', 'http', 'connect', 'tcp')),
  name TEXT NOT NULL DEFAULT '',
  address TEXT NOT NULL DEFAULT '',
  port INTEGER NOT NULL CHECK (port BETWEEN 0 AND 65535),
  verdict TEXT NOT NULL CHECK (verdict IN ('allowed', 'denied', 'error')),
  reason TEXT NOT NULL DEFAULT '',
  matched_rule TEXT NOT NULL DEFAULT '',
  via_override INTEGER NOT NULL DEFAULT 0 CHECK (via_override IN (0, 1)),
  bytes_up INTEGER NOT NULL DEFAULT 0 CHECK (bytes_up >= 0),
  bytes_down INTEGER NOT NULL DEFAULT 0 CHECK (bytes_down >= 0),
  duration_ms INTEGER NOT NULL DEFAULT 0 CHECK (duration_ms >= 0)
) STRICT;
CREATE INDEX egress_connections_by_sandbox ON egress_connections (sandbox_id, seq);

CREATE TABLE egress_dns (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
  time INTEGER NOT NULL,
  name TEXT NOT NULL DEFAULT '',
  qtype INTEGER NOT NULL DEFAULT 0,
  verdict TEXT NOT NULL CHECK (verdict IN ('allowed', 'denied', 'error')),
  rcode INTEGER NOT NULL DEFAULT 0,
  answers TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(answers)),
  reason TEXT NOT NULL DEFAULT '',
  matched_rule TEXT NOT NULL DEFAULT '',
  via_override INTEGER NOT NULL DEFAULT 0 CHECK (via_override IN (0, 1))
) STRICT;
CREATE INDEX egress_dns_by_sandbox ON egress_dns (sandbox_id, seq);

-- One row per (sandbox, name) the policy refused: the review queue is the pending ones.
CREATE TABLE egress_requests (
  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  port INTEGER NOT NULL DEFAULT 0 CHECK (port BETWEEN 0 AND 65535),  -- last seen; 0: DNS only
  count INTEGER NOT NULL DEFAULT 0 CHECK (count >= 0),
  first_seen INTEGER NOT NULL,
  last_seen INTEGER NOT NULL,
  state TEXT NOT NULL
      CHECK (state IN ('pending', 'approved_once', 'approved', 'denied', 'ignored')),
  reason TEXT NOT NULL DEFAULT '',
  once_port INTEGER NOT NULL DEFAULT 0 CHECK (once_port BETWEEN 0 AND 65535),
  once_left INTEGER NOT NULL DEFAULT 0 CHECK (once_left IN (0, 1)),
  PRIMARY KEY (sandbox_id, name)
) STRICT;
CREATE INDEX egress_requests_by_state ON egress_requests (state, last_seen);

-- Names a person chose to leave denied without being asked again (any sandbox).
CREATE TABLE egress_ignored (
  name TEXT PRIMARY KEY NOT NULL,
  ignored_at INTEGER NOT NULL
) STRICT;
)sql";

// Retention per sandbox (hardening, issue 11): what each sandbox lost to its caps, so a
// guest's flood is counted where it happened and never pushes out another sandbox's records.
// No foreign key: a sandbox's events (and so their counters) outlive it. sandbox_id '' is the
// daemon-wide events.
constexpr char kSchemaV3[] = R"sql(
CREATE TABLE retention_counters (
  sandbox_id TEXT PRIMARY KEY NOT NULL,
  queue_dropped INTEGER NOT NULL DEFAULT 0 CHECK (queue_dropped >= 0),   -- names not queued
  connections_pruned INTEGER NOT NULL DEFAULT 0 CHECK (connections_pruned >= 0),
  dns_pruned INTEGER NOT NULL DEFAULT 0 CHECK (dns_pruned >= 0),
  events_pruned INTEGER NOT NULL DEFAULT 0 CHECK (events_pruned >= 0),
  events_pruned_through INTEGER NOT NULL DEFAULT 0,  -- the newest event seq pruned
  -- Rows kept now, so that keeping the newest N costs one index step per insert, not N.
  connections_kept INTEGER NOT NULL DEFAULT 0,
  dns_kept INTEGER NOT NULL DEFAULT 0,
  events_kept INTEGER NOT NULL DEFAULT 0
) STRICT;
INSERT INTO retention_counters (sandbox_id) SELECT DISTINCT coalesce(sandbox_id, '') FROM events
  UNION SELECT sandbox_id FROM egress_connections UNION SELECT sandbox_id FROM egress_dns;
UPDATE retention_counters SET
  connections_kept = (SELECT count(*) FROM egress_connections c
                      WHERE c.sandbox_id = retention_counters.sandbox_id),
  dns_kept = (SELECT count(*) FROM egress_dns d WHERE d.sandbox_id = retention_counters.sandbox_id),
  events_kept = (SELECT count(*) FROM events e
                 WHERE coalesce(e.sandbox_id, '') = retention_counters.sandbox_id);
CREATE INDEX events_by_sandbox ON events (sandbox_id, seq);
CREATE INDEX egress_requests_by_sandbox_state ON egress_requests (sandbox_id, state);
)sql";

// A sandbox may be paused (saved to disk, no VM: issue 13). SQLite cannot change a CHECK in
// place, so the table is rebuilt, the SQLite way (https://sqlite.org/lang_altertable.html,
// "otheralter"): foreign keys off (ApplyOne), new table, copy, drop, rename; the tables that
// reference `sandboxes` by name then reference the new one.
constexpr char kSchemaV4[] = R"sql(
CREATE TABLE sandboxes_v4 (
  id TEXT PRIMARY KEY NOT NULL
      CHECK (length(id) = 12 AND id NOT GLOB '*[^0-9a-f]*'),
  name TEXT UNIQUE,                       -- NULL when unnamed
  image TEXT NOT NULL,
  cpus INTEGER NOT NULL CHECK (cpus > 0),
  memory_mib INTEGER NOT NULL CHECK (memory_mib > 0),
  labels TEXT NOT NULL DEFAULT '{}'       -- JSON object of strings
      CHECK (json_valid(labels) AND json_type(labels) = 'object'),
  state TEXT NOT NULL
      CHECK (state IN ('creating', 'ready', 'stopping', 'stopped', 'failed', 'removed',
                       'paused')),
  failure TEXT NOT NULL DEFAULT '',
  run_dir TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  ready_at INTEGER,
  ttl_seconds INTEGER NOT NULL DEFAULT 0 CHECK (ttl_seconds >= 0),       -- 0: none
  idle_timeout_seconds INTEGER NOT NULL DEFAULT 0 CHECK (idle_timeout_seconds >= 0),
  last_active_at INTEGER,
  vmm_pid INTEGER,                        -- diagnostic only; pids are reused
  accel TEXT NOT NULL DEFAULT ''
) STRICT;
INSERT INTO sandboxes_v4 (id, name, image, cpus, memory_mib, labels, state, failure, run_dir,
                          created_at, ready_at, ttl_seconds, idle_timeout_seconds,
                          last_active_at, vmm_pid, accel)
  SELECT id, name, image, cpus, memory_mib, labels, state, failure, run_dir, created_at,
         ready_at, ttl_seconds, idle_timeout_seconds, last_active_at, vmm_pid, accel
  FROM sandboxes;
DROP TABLE sandboxes;
ALTER TABLE sandboxes_v4 RENAME TO sandboxes;
CREATE INDEX sandboxes_by_state ON sandboxes (state);
)sql";

// Secrets' specs (names, hosts, header, source: never values; those live in the keyring or the
// 0600 file store, src/secrets).
constexpr char kSchemaV5[] = R"sql(
CREATE TABLE secrets (
  name TEXT PRIMARY KEY NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  spec TEXT NOT NULL,                     -- secrets::SecretSpecToJson
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
)sql";

// What each sandbox was given (issue 15): its secrets, each with the variable and the
// placeholder the guest holds (placeholders are per sandbox and kept so that a restarted aboxd
// recognises them), and the git pushes it may make. Gone with the sandbox's row.
constexpr char kSchemaV6[] = R"sql(
CREATE TABLE sandbox_secrets (
  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  env TEXT NOT NULL CHECK (length(env) BETWEEN 1 AND 128),
  placeholder TEXT NOT NULL UNIQUE,
  PRIMARY KEY (sandbox_id, name)
) STRICT;
CREATE INDEX sandbox_secrets_by_name ON sandbox_secrets (name);
CREATE TABLE sandbox_git_push (
  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
  rule TEXT NOT NULL,                     -- "HOST/OWNER/REPO:BRANCH-PATTERN"
  PRIMARY KEY (sandbox_id, rule)
) STRICT;
)sql";

// The model broker (issue 16): which APIs each sandbox's agents may reach through it and the
// token they hold for it (the same for each API of a sandbox); where each API is sent and which
// secret holds its key (never the key); and what each sandbox used. Usage rows stay with a
// removed sandbox's record and go with it.
constexpr char kSchemaV7[] = R"sql(
CREATE TABLE sandbox_models (
  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
  api TEXT NOT NULL CHECK (api IN ('anthropic', 'openai')),
  token TEXT NOT NULL CHECK (length(token) BETWEEN 32 AND 128),
  PRIMARY KEY (sandbox_id, api)
) STRICT;
CREATE TABLE model_providers (
  api TEXT PRIMARY KEY NOT NULL CHECK (api IN ('anthropic', 'openai')),
  secret TEXT NOT NULL CHECK (length(secret) BETWEEN 1 AND 64),
  base_url TEXT NOT NULL CHECK (length(base_url) BETWEEN 1 AND 2048),
  updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE model_usage (
  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
  api TEXT NOT NULL,
  requests INTEGER NOT NULL DEFAULT 0,
  errors INTEGER NOT NULL DEFAULT 0,
  refused INTEGER NOT NULL DEFAULT 0,
  input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  last_at INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (sandbox_id, api)
) STRICT;
)sql";

// Sandboxes' disks have a size of their own (issue 19, `abox create --disk`); 0 for the rows
// from before, whose disk was the image's size.
constexpr char kSchemaV8[] = R"sql(
ALTER TABLE sandboxes ADD COLUMN disk_mib INTEGER NOT NULL DEFAULT 0 CHECK (disk_mib >= 0);
)sql";

// How many processes the guest's OOM killer ended while each exec ran (issue 19), so that an
// exec's record can say the command died for lack of memory long after it ended.
constexpr char kSchemaV9[] = R"sql(
ALTER TABLE execs ADD COLUMN oom_kills INTEGER NOT NULL DEFAULT 0 CHECK (oom_kills >= 0);
)sql";

constexpr Migration kMigrations[] = {
    {1, "sandboxes, execs with bounded output, events", kSchemaV1},
    {2, "egress policies, connection and DNS logs, ask-to-allow requests", kSchemaV2},
    {3, "per-sandbox retention counters, events and requests indexed by sandbox", kSchemaV3},
    {4, "sandboxes may be paused", kSchemaV4, /*rebuilds_tables=*/true},
    {5, "secrets' specs", kSchemaV5},
    {6, "the secrets and git pushes each sandbox was given", kSchemaV6},
    {7, "the model broker: sandboxes' model APIs and tokens, providers, usage", kSchemaV7},
    {8, "sandboxes' disk sizes", kSchemaV8},
    {9, "the OOM kills during each exec", kSchemaV9},
};

absl::StatusOr<int> ReadVersion(Connection& connection) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare("PRAGMA user_version"));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return absl::InternalError("PRAGMA user_version returned no row");
  }
  return static_cast<int>(stmt.ColumnInt64(0));
}

absl::Status CheckNotNewer(const Database& db, int version, int latest) {
  if (version <= latest) {
    return absl::OkStatus();
  }
  std::string file = std::filesystem::path(db.path()).filename().string();
  return absl::FailedPreconditionError(
      absl::StrCat(file, " was written by a newer abox (schema ", version, " > ", latest,
                   "); upgrade abox, or move ", db.path(), " aside to start with empty state"));
}

// Applies one migration unless another connection got there first.
absl::Status ApplyOne(Database& db, const Migration& migration, int latest) {
  Connection connection = db.Lock();
  if (migration.rebuilds_tables) {
    // Outside the transaction: SQLite ignores this pragma inside one.
    ABOX_RETURN_IF_ERROR(connection.Execute("PRAGMA foreign_keys=OFF"));
  }
  absl::Cleanup keys_on = [&] {
    if (migration.rebuilds_tables) {
      (void)connection.Execute("PRAGMA foreign_keys=ON");
    }
  };
  ABOX_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(connection));
  ABOX_ASSIGN_OR_RETURN(int version, ReadVersion(connection));
  ABOX_RETURN_IF_ERROR(CheckNotNewer(db, version, latest));
  if (version >= migration.version) {
    return absl::OkStatus();  // rolls back an empty transaction
  }
  absl::Status applied = connection.Execute(migration.sql);
  if (applied.ok() && migration.rebuilds_tables) {
    // The rebuilt tables still satisfy every reference to them.
    absl::StatusOr<Statement> check = connection.Prepare("PRAGMA foreign_key_check");
    if (!check.ok()) {
      applied = check.status();
    } else if (absl::StatusOr<bool> row = check->Step(); !row.ok() || *row) {
      applied = row.ok() ? absl::InternalError("a foreign key no longer holds") : row.status();
    }
  }
  if (applied.ok()) {
    // PRAGMA takes no parameters; the version is an integer from our own table.
    applied = connection.Execute(absl::StrCat("PRAGMA user_version = ", migration.version));
  }
  if (applied.ok()) {
    applied = transaction.Commit();
  }
  if (!applied.ok()) {
    return absl::Status(applied.code(), absl::StrCat("schema migration ", migration.version, " (",
                                                     migration.description, ") failed on ",
                                                     db.path(), ": ", applied.message()));
  }
  return absl::OkStatus();
}

}  // namespace

std::span<const Migration> SchemaMigrations() { return kMigrations; }

int LatestSchemaVersion() { return SchemaMigrations().back().version; }

absl::StatusOr<int> SchemaVersion(Database& db) {
  Connection connection = db.Lock();
  return ReadVersion(connection);
}

absl::Status ApplyMigrations(Database& db, std::span<const Migration> migrations) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i) + 1) {
      return absl::InternalError(
          absl::StrCat("migration #", i, " has version ", migrations[i].version, ", want ", i + 1));
    }
  }
  int latest = static_cast<int>(migrations.size());
  // Each step again while another connection holds the database (e.g. another process that
  // opens it at the same moment): what SQLite's busy handler does not wait for fails at once.
  int version = 0;
  ABOX_RETURN_IF_ERROR(db.RetryWhileBusy([&]() -> absl::Status {
    ABOX_ASSIGN_OR_RETURN(version, SchemaVersion(db));
    return absl::OkStatus();
  }));
  ABOX_RETURN_IF_ERROR(CheckNotNewer(db, version, latest));
  for (const Migration& migration : migrations) {
    if (migration.version > version) {
      ABOX_RETURN_IF_ERROR(db.RetryWhileBusy([&] { return ApplyOne(db, migration, latest); }));
    }
  }
  return absl::OkStatus();
}

absl::Status Migrate(Database& db) { return ApplyMigrations(db, SchemaMigrations()); }

absl::StatusOr<std::unique_ptr<Database>> OpenStateDatabase(const std::string& path,
                                                            const DatabaseOptions& options) {
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path, options));
  ABOX_RETURN_IF_ERROR(Migrate(*db));
  return db;
}

}  // namespace abox::store
