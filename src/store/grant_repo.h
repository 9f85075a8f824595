// What each sandbox was given (issue 15): its secrets (the variable and the per-sandbox
// placeholder the guest holds for each) and the git pushes it may make; and (issue 16) the model
// APIs its agents may reach through the broker, with their token. Never a value.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/store/database.h"

namespace abox::store {

struct SandboxSecretRow {
  std::string sandbox_id;
  std::string name;         // the secret's name
  std::string env;          // the guest's variable holding the placeholder
  std::string placeholder;  // unique across sandboxes

  friend bool operator==(const SandboxSecretRow&, const SandboxSecretRow&) = default;
};

struct SandboxGrants {
  std::vector<SandboxSecretRow> secrets;  // by name
  std::vector<std::string> git_push;      // "HOST/OWNER/REPO:BRANCH-PATTERN", as given
  // The model APIs its agents may reach through the broker ("anthropic", "openai"; issue 16),
  // and the token they hold for it (empty when none).
  std::vector<std::string> models;
  std::string model_token;

  [[nodiscard]] bool empty() const { return !intercepts() && models.empty(); }
  // What makes the proxy terminate TLS (and the guest trust abox's CA): secrets or pushes.
  [[nodiscard]] bool intercepts() const { return !secrets.empty() || !git_push.empty(); }
  friend bool operator==(const SandboxGrants&, const SandboxGrants&) = default;
};

class GrantRepo final {
 public:
  explicit GrantRepo(Database& db) : db_(&db) {}

  // Records what `sandbox_id` (which must exist) was given, in one transaction; a sandbox's
  // grants are written once, at create (kAlreadyExists when it has some already).
  [[nodiscard]] absl::Status Put(absl::string_view sandbox_id, const SandboxGrants& grants);
  // Empty grants when it was given nothing.
  [[nodiscard]] absl::StatusOr<SandboxGrants> Get(absl::string_view sandbox_id);
  // The sandboxes (not removed) given secret `name`, by id.
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> UsersOf(absl::string_view name);

 private:
  Database* db_;
};

}  // namespace abox::store
