#include "src/store/grant_repo.h"

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::store {

absl::Status GrantRepo::Put(absl::string_view sandbox_id, const SandboxGrants& grants) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(connection));
  for (const SandboxSecretRow& row : grants.secrets) {
    ABOX_ASSIGN_OR_RETURN(
        Statement stmt,
        connection.Prepare("INSERT INTO sandbox_secrets (sandbox_id, name, env, placeholder) "
                           "VALUES (?1, ?2, ?3, ?4)"));
    ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
    ABOX_RETURN_IF_ERROR(stmt.BindText(2, row.name));
    ABOX_RETURN_IF_ERROR(stmt.BindText(3, row.env));
    ABOX_RETURN_IF_ERROR(stmt.BindText(4, row.placeholder));
    ABOX_RETURN_IF_ERROR(stmt.Run());
  }
  for (const std::string& rule : grants.git_push) {
    ABOX_ASSIGN_OR_RETURN(
        Statement stmt,
        connection.Prepare("INSERT INTO sandbox_git_push (sandbox_id, rule) VALUES (?1, ?2)"));
    ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
    ABOX_RETURN_IF_ERROR(stmt.BindText(2, rule));
    ABOX_RETURN_IF_ERROR(stmt.Run());
  }
  for (const std::string& api : grants.models) {
    ABOX_ASSIGN_OR_RETURN(Statement stmt,
                          connection.Prepare("INSERT INTO sandbox_models (sandbox_id, api, token) "
                                             "VALUES (?1, ?2, ?3)"));
    ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
    ABOX_RETURN_IF_ERROR(stmt.BindText(2, api));
    ABOX_RETURN_IF_ERROR(stmt.BindText(3, grants.model_token));
    ABOX_RETURN_IF_ERROR(stmt.Run());
  }
  return tx.Commit();
}

absl::StatusOr<SandboxGrants> GrantRepo::Get(absl::string_view sandbox_id) {
  Connection connection = db_->Lock();
  SandboxGrants grants;
  {
    ABOX_ASSIGN_OR_RETURN(Statement stmt,
                          connection.Prepare("SELECT name, env, placeholder FROM sandbox_secrets "
                                             "WHERE sandbox_id = ? ORDER BY name"));
    ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
    while (true) {
      ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) {
        break;
      }
      grants.secrets.push_back(SandboxSecretRow{.sandbox_id = std::string(sandbox_id),
                                                .name = stmt.ColumnText(0),
                                                .env = stmt.ColumnText(1),
                                                .placeholder = stmt.ColumnText(2)});
    }
  }
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare("SELECT rule FROM sandbox_git_push WHERE sandbox_id = ? ORDER BY rule"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  while (true) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      break;
    }
    grants.git_push.push_back(stmt.ColumnText(0));
  }
  ABOX_ASSIGN_OR_RETURN(
      Statement models,
      connection.Prepare(
          "SELECT api, token FROM sandbox_models WHERE sandbox_id = ? ORDER BY api"));
  ABOX_RETURN_IF_ERROR(models.BindText(1, sandbox_id));
  while (true) {
    ABOX_ASSIGN_OR_RETURN(bool row, models.Step());
    if (!row) {
      break;
    }
    grants.models.push_back(models.ColumnText(0));
    grants.model_token = models.ColumnText(1);
  }
  return grants;
}

absl::StatusOr<std::vector<std::string>> GrantRepo::UsersOf(absl::string_view name) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt,
      connection.Prepare("SELECT g.sandbox_id FROM sandbox_secrets g JOIN sandboxes s "
                         "ON s.id = g.sandbox_id WHERE g.name = ? AND s.state != 'removed' "
                         "ORDER BY g.sandbox_id"));
  ABOX_RETURN_IF_ERROR(stmt.BindText(1, name));
  std::vector<std::string> ids;
  while (true) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      break;
    }
    ids.push_back(stmt.ColumnText(0));
  }
  return ids;
}

}  // namespace abox::store
