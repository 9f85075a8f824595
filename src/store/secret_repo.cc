#include "src/store/secret_repo.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/store/column_codec.h"

namespace abox::store {
namespace {

constexpr char kColumns[] = "name, spec, created_at, updated_at";

SecretRow ReadRow(const Statement& stmt) {
  return SecretRow{.name = stmt.ColumnText(0),
                   .spec = stmt.ColumnText(1),
                   .created_at = FromMillis(stmt.ColumnInt64(2)),
                   .updated_at = FromMillis(stmt.ColumnInt64(3))};
}

absl::Status NoSuchSecret(absl::string_view name) {
  return absl::NotFoundError(
      absl::StrCat("no secret named ", name, " (abox secret ls lists them)"));
}

}  // namespace

SecretRepo::SecretRepo(Database& db, Clock clock) : db_(&db), clock_(std::move(clock)) {}

absl::StatusOr<SecretRow> SecretRepo::Put(absl::string_view name, absl::string_view spec) {
  {
    Connection connection = db_->Lock();
    ABOX_ASSIGN_OR_RETURN(
        Statement stmt,
        connection.Prepare(absl::StrCat(
            "INSERT INTO secrets (", kColumns,
            ") VALUES (?1, ?2, ?3, ?3) ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, "
            "updated_at = excluded.updated_at")));
    ABOX_RETURN_IF_ERROR(stmt.BindText(1, name));
    ABOX_RETURN_IF_ERROR(stmt.BindText(2, spec));
    ABOX_RETURN_IF_ERROR(stmt.BindInt64(3, ToMillis(clock_())));
    ABOX_RETURN_IF_ERROR(stmt.Run());
  }
  return Get(name);
}

absl::StatusOr<SecretRow> SecretRepo::Get(absl::string_view name) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare(absl::StrCat(
                                            "SELECT ", kColumns, " FROM secrets WHERE name = ?")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, name));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return NoSuchSecret(name);
  }
  return ReadRow(stmt);
}

absl::StatusOr<std::vector<SecretRow>> SecretRepo::List() {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare(absl::StrCat(
                                            "SELECT ", kColumns, " FROM secrets ORDER BY name")));
  std::vector<SecretRow> rows;
  while (true) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      break;
    }
    rows.push_back(ReadRow(stmt));
  }
  return rows;
}

absl::Status SecretRepo::Delete(absl::string_view name) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt, connection.Prepare("DELETE FROM secrets WHERE name = ?"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, name));
  ABOX_RETURN_IF_ERROR(stmt.Run());
  if (connection.ChangedRows() == 0) {
    return NoSuchSecret(name);
  }
  return absl::OkStatus();
}

}  // namespace abox::store
