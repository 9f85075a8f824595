#include "src/store/statement.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/status_macros.h"

namespace abox::store {
namespace {

// The statement as one short line for an error message.
std::string Summary(absl::string_view sql) {
  std::string out;
  for (absl::string_view word :
       absl::StrSplit(sql, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty())) {
    if (!out.empty()) {
      out += ' ';
    }
    absl::StrAppend(&out, word);
  }
  constexpr size_t kMax = 120;
  if (out.size() > kMax) {
    out.resize(kMax);
    out += "...";
  }
  return out;
}

absl::StatusCode CodeFor(int extended_rc) {
  switch (extended_rc) {
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_UNIQUE:
      return absl::StatusCode::kAlreadyExists;
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return absl::StatusCode::kFailedPrecondition;
    default:
      break;
  }
  switch (extended_rc & 0xff) {
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
      return absl::StatusCode::kInvalidArgument;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what, absl::string_view sql) {
  // sqlite3_errmsg describes the most recent failure on `db`; without a handle (out of memory
  // at open) fall back to the generic text for the code.
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  int extended = db != nullptr ? sqlite3_extended_errcode(db) : rc;
  if ((extended & 0xff) != (rc & 0xff)) {
    extended = rc;
  }
  return absl::Status(CodeFor(extended),
                      absl::StrCat("SQLite ", what, " failed for '", Summary(sql), "': ", message));
}

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      sql_(std::move(other.sql_)),
      cache_(std::exchange(other.cache_, nullptr)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    Release();
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    sql_ = std::move(other.sql_);
    cache_ = std::exchange(other.cache_, nullptr);
  }
  return *this;
}

Statement::~Statement() { Release(); }

void Statement::Release() {
  if (stmt_ == nullptr) {
    return;
  }
  if (cache_ != nullptr && cache_->count(sql_) == 0) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    cache_->emplace(sql_, stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
  stmt_ = nullptr;
}

absl::StatusOr<int> Statement::Index(Param param) const {
  if (param.name() == nullptr) {
    if (param.index() < 1 || param.index() > sqlite3_bind_parameter_count(stmt_)) {
      return absl::InvalidArgumentError(
          absl::StrCat("no parameter ", param.index(), " in '", Summary(sql_), "'"));
    }
    return param.index();
  }
  int index = sqlite3_bind_parameter_index(stmt_, param.name());
  if (index == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no parameter ", param.name(), " in '", Summary(sql_), "'"));
  }
  return index;
}

absl::Status Statement::BindResult(int rc, Param param) const {
  if (rc == SQLITE_OK) {
    return absl::OkStatus();
  }
  std::string what = param.name() != nullptr ? absl::StrCat("bind(", param.name(), ")")
                                             : absl::StrCat("bind(", param.index(), ")");
  return SqliteError(db_, rc, what, sql_);
}

absl::Status Statement::BindInt64(Param param, int64_t value) {
  ABOX_ASSIGN_OR_RETURN(int index, Index(param));
  return BindResult(sqlite3_bind_int64(stmt_, index, value), param);
}

absl::Status Statement::BindDouble(Param param, double value) {
  ABOX_ASSIGN_OR_RETURN(int index, Index(param));
  return BindResult(sqlite3_bind_double(stmt_, index, value), param);
}

absl::Status Statement::BindBool(Param param, bool value) {
  return BindInt64(param, value ? 1 : 0);
}

absl::Status Statement::BindText(Param param, absl::string_view value) {
  ABOX_ASSIGN_OR_RETURN(int index, Index(param));
  // A null pointer would bind NULL; an empty view may have one.
  const char* data = value.data() != nullptr ? value.data() : "";
  return BindResult(
      sqlite3_bind_text64(stmt_, index, data, value.size(), SQLITE_TRANSIENT, SQLITE_UTF8), param);
}

absl::Status Statement::BindBlob(Param param, absl::string_view value) {
  ABOX_ASSIGN_OR_RETURN(int index, Index(param));
  if (value.empty()) {
    return BindResult(sqlite3_bind_zeroblob(stmt_, index, 0), param);
  }
  return BindResult(sqlite3_bind_blob64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT),
                    param);
}

absl::Status Statement::BindNull(Param param) {
  ABOX_ASSIGN_OR_RETURN(int index, Index(param));
  return BindResult(sqlite3_bind_null(stmt_, index), param);
}

absl::Status Statement::BindOptionalInt64(Param param, std::optional<int64_t> value) {
  return value.has_value() ? BindInt64(param, *value) : BindNull(param);
}

absl::StatusOr<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  absl::Status status = SqliteError(db_, rc, "step", sql_);
  // After an error the statement must be reset before it can run again.
  sqlite3_reset(stmt_);
  return status;
}

absl::Status Statement::Run() {
  while (true) {
    auto row = Step();
    if (!row.ok()) {
      return row.status();
    }
    if (!*row) {
      return absl::OkStatus();
    }
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int Statement::ColumnCount() const { return sqlite3_column_count(stmt_); }

bool Statement::ColumnIsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::ColumnInt64(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::ColumnDouble(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) {
    return "";
  }
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::string Statement::ColumnBlob(int column) const {
  const void* blob = sqlite3_column_blob(stmt_, column);
  if (blob == nullptr) {
    return "";
  }
  return std::string(static_cast<const char*>(blob),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::optional<int64_t> Statement::ColumnOptionalInt64(int column) const {
  if (ColumnIsNull(column)) {
    return std::nullopt;
  }
  return ColumnInt64(column);
}

}  // namespace abox::store
