#include "src/store/model_repo.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/store/column_codec.h"

namespace abox::store {
namespace {

ModelProviderRow ReadProvider(const Statement& stmt) {
  return ModelProviderRow{.api = stmt.ColumnText(0),
                          .secret = stmt.ColumnText(1),
                          .base_url = stmt.ColumnText(2),
                          .updated_at = FromMillis(stmt.ColumnInt64(3))};
}

constexpr char kProviderColumns[] = "api, secret, base_url, updated_at";

}  // namespace

absl::StatusOr<ModelProviderRow> ModelRepo::PutProvider(const ModelProviderRow& row) {
  ModelProviderRow out = row;
  out.updated_at = FromMillis(ToMillis(clock_()));
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare("INSERT INTO model_providers (api, secret, base_url, updated_at) "
                         "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (api) DO UPDATE SET "
                         "secret = excluded.secret, base_url = excluded.base_url, "
                         "updated_at = excluded.updated_at"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, out.api));
  ABOX_RETURN_IF_ERROR(stmt.BindText(2, out.secret));
  ABOX_RETURN_IF_ERROR(stmt.BindText(3, out.base_url));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(4, ToMillis(out.updated_at)));
  ABOX_RETURN_IF_ERROR(stmt.Run());
  return out;
}

absl::StatusOr<std::optional<ModelProviderRow>> ModelRepo::GetProvider(absl::string_view api) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare(absl::StrCat("SELECT ", kProviderColumns,
                                                        " FROM model_providers WHERE api = ?")));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, api));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return std::nullopt;
  }
  return ReadProvider(stmt);
}

absl::StatusOr<std::vector<ModelProviderRow>> ModelRepo::ListProviders() {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare(absl::StrCat("SELECT ", kProviderColumns,
                                                        " FROM model_providers ORDER BY api")));
  std::vector<ModelProviderRow> rows;
  while (true) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return rows;
    }
    rows.push_back(ReadProvider(stmt));
  }
}

absl::Status ModelRepo::DeleteProvider(absl::string_view api) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("DELETE FROM model_providers WHERE api = ?"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, api));
  ABOX_RETURN_IF_ERROR(stmt.Run());
  if (connection.ChangedRows() == 0) {
    return absl::NotFoundError(absl::StrCat("no provider is set for ", api));
  }
  return absl::OkStatus();
}

absl::Status ModelRepo::AddUsage(const ModelUsageRow& d) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare(
          "INSERT INTO model_usage (sandbox_id, api, requests, errors, refused, input_tokens, "
          "output_tokens, last_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
          "ON CONFLICT (sandbox_id, api) DO UPDATE SET requests = requests + excluded.requests, "
          "errors = errors + excluded.errors, refused = refused + excluded.refused, "
          "input_tokens = input_tokens + excluded.input_tokens, "
          "output_tokens = output_tokens + excluded.output_tokens, last_at = excluded.last_at"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, d.sandbox_id));
  ABOX_RETURN_IF_ERROR(stmt.BindText(2, d.api));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(3, static_cast<int64_t>(d.requests)));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(4, static_cast<int64_t>(d.errors)));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(5, static_cast<int64_t>(d.refused)));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(6, static_cast<int64_t>(d.input_tokens)));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(7, static_cast<int64_t>(d.output_tokens)));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(8, ToMillis(clock_())));
  return stmt.Run();
}

absl::StatusOr<std::vector<ModelUsageRow>> ModelRepo::Usage(absl::string_view sandbox_id) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare("SELECT api, requests, errors, refused, input_tokens, output_tokens, "
                         "last_at FROM model_usage WHERE sandbox_id = ? ORDER BY api"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  std::vector<ModelUsageRow> rows;
  while (true) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return rows;
    }
    rows.push_back(ModelUsageRow{.sandbox_id = std::string(sandbox_id),
                                 .api = stmt.ColumnText(0),
                                 .requests = static_cast<uint64_t>(stmt.ColumnInt64(1)),
                                 .errors = static_cast<uint64_t>(stmt.ColumnInt64(2)),
                                 .refused = static_cast<uint64_t>(stmt.ColumnInt64(3)),
                                 .input_tokens = static_cast<uint64_t>(stmt.ColumnInt64(4)),
                                 .output_tokens = static_cast<uint64_t>(stmt.ColumnInt64(5)),
                                 .last_at = FromMillis(stmt.ColumnInt64(6))});
  }
}

}  // namespace abox::store
