// The secrets table: one row per secret, its spec as JSON (names, hosts, header, where the value
// comes from). Never a value: values live in the keyring or the 0600 file store (src/secrets).
//
// The store keeps the spec text as the daemon gives it (src/secrets validates it); it does not
// depend on src/secrets.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/store/database.h"

namespace abox::store {

struct SecretRow {
  std::string name;
  std::string spec;  // JSON text
  absl::Time created_at;
  absl::Time updated_at;

  friend bool operator==(const SecretRow&, const SecretRow&) = default;
};

class SecretRepo final {
 public:
  explicit SecretRepo(Database& db, Clock clock = absl::Now);

  // Adds or replaces `name`'s spec; a replaced row keeps its created_at. Returns the row.
  [[nodiscard]] absl::StatusOr<SecretRow> Put(absl::string_view name, absl::string_view spec);
  // kNotFound naming the secret when there is none.
  [[nodiscard]] absl::StatusOr<SecretRow> Get(absl::string_view name);
  // Every secret, by name.
  [[nodiscard]] absl::StatusOr<std::vector<SecretRow>> List();
  // kNotFound when there was none.
  [[nodiscard]] absl::Status Delete(absl::string_view name);

 private:
  Database* db_;
  Clock clock_;
};

}  // namespace abox::store
