// A prepared SQLite statement: binding, stepping, reading columns, with every SQLite error
// turned into a Status that names the statement.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace abox::store {

// Names a statement parameter: a 1-based index, or a name with its prefix (":id").
class Param final {
 public:
  // Implicit, so that call sites read stmt.BindText(1, x) and stmt.BindText(":id", x).
  Param(int index) : index_(index) {}       // NOLINT(google-explicit-constructor)
  Param(const char* name) : name_(name) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] int index() const { return index_; }
  [[nodiscard]] const char* name() const { return name_; }

 private:
  int index_ = 0;
  const char* name_ = nullptr;
};

// Owns one sqlite3_stmt and finalizes it on destruction. Move-only.
//
// Thread safety: none of its own. A Statement belongs to the connection it was prepared on and
// may be used (and destroyed) only while that connection is held (see Database::Lock), so it
// must be declared after the Connection in the same scope.
class Statement final {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Bind a value. Text and blobs are copied (SQLITE_TRANSIENT). An unknown parameter name or
  // an index out of range is kInvalidArgument.
  [[nodiscard]] absl::Status BindInt64(Param param, int64_t value);
  [[nodiscard]] absl::Status BindDouble(Param param, double value);
  [[nodiscard]] absl::Status BindBool(Param param, bool value);
  [[nodiscard]] absl::Status BindText(Param param, absl::string_view value);
  [[nodiscard]] absl::Status BindBlob(Param param, absl::string_view value);
  [[nodiscard]] absl::Status BindNull(Param param);
  // NULL when `value` is empty.
  [[nodiscard]] absl::Status BindOptionalInt64(Param param, std::optional<int64_t> value);

  // Advances: true when a row is available, false when the statement is done.
  [[nodiscard]] absl::StatusOr<bool> Step();
  // Steps until done, ignoring any rows (for INSERT / UPDATE / DELETE).
  [[nodiscard]] absl::Status Run();
  // Makes the statement ready to run again and clears its bindings.
  void Reset();

  // Column getters for the current row (0-based). NULL reads as 0 / "".
  [[nodiscard]] int ColumnCount() const;
  [[nodiscard]] bool ColumnIsNull(int column) const;
  [[nodiscard]] int64_t ColumnInt64(int column) const;
  [[nodiscard]] double ColumnDouble(int column) const;
  [[nodiscard]] bool ColumnBool(int column) const { return ColumnInt64(column) != 0; }
  [[nodiscard]] std::string ColumnText(int column) const;
  [[nodiscard]] std::string ColumnBlob(int column) const;
  [[nodiscard]] std::optional<int64_t> ColumnOptionalInt64(int column) const;

  // The SQL text, for error messages.
  [[nodiscard]] const std::string& sql() const { return sql_; }

 private:
  friend class Connection;
  using Cache = std::unordered_map<std::string, sqlite3_stmt*>;
  Statement(sqlite3* db, sqlite3_stmt* stmt, std::string sql, Cache* cache)
      : db_(db), stmt_(stmt), sql_(std::move(sql)), cache_(cache) {}
  // Returns the compiled statement to the cache (reset, bindings cleared), or finalizes it.
  void Release();

  // The parameter index for `param`, or kInvalidArgument.
  [[nodiscard]] absl::StatusOr<int> Index(Param param) const;
  absl::Status BindResult(int rc, Param param) const;

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
  Cache* cache_ = nullptr;
};

// The Status for SQLite result code `rc` on `db` while doing `what` ("step", "prepare"...) for
// `sql`: names the statement, quotes sqlite3_errmsg, and maps the code (constraint violations
// -> kAlreadyExists / kFailedPrecondition / kInvalidArgument, busy -> kUnavailable, corrupt or
// not-a-database -> kDataLoss, full -> kResourceExhausted, permissions -> kPermissionDenied,
// everything else kInternal).
[[nodiscard]] absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what,
                                       absl::string_view sql);

}  // namespace abox::store
