// Secrets as aboxd keeps them (issue 15): specs in SQLite (store::SecretRepo), the values of
// stored secrets in the keyring or the 0600 file store (src/secrets), the others resolved from
// their source (a command, Vault) on use.
//
// A value goes in through Set and out through Resolve only: never into an answer, an event, a
// log line or SQLite.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/secrets/keyring_store.h"
#include "src/secrets/secret.h"
#include "src/store/secret_repo.h"

namespace abox::daemon {

struct SecretView {
  secrets::SecretSpec spec;
  std::string stored_in;  // a stored secret's value store ("keyring", "file <path>"); else ""
  absl::Time created_at;
  absl::Time updated_at;
};

class SecretService final {
 public:
  // Opens where stored values live; called on first need (the keyring's probe can take
  // seconds, and most aboxd runs never touch a secret).
  using ValueStoreOpener = std::function<absl::StatusOr<secrets::DefaultValueStore>()>;
  // How a command or Vault source is read (tests inject fakes).
  using SourceReader =
      std::function<absl::StatusOr<secrets::SecretValue>(const secrets::SecretSpec&)>;

  SecretService(store::SecretRepo& repo, ValueStoreOpener open_values,
                SourceReader read_source = ReadSource);

  // Adds or replaces a secret. A stored secret needs `value` (one line: no control
  // characters); a command or Vault secret must not have one, and its source is read once here
  // to check it works (the value is not kept).
  [[nodiscard]] absl::StatusOr<SecretView> Set(const nlohmann::json& spec,
                                               std::optional<secrets::SecretValue> value);
  [[nodiscard]] absl::StatusOr<SecretView> Get(const std::string& name);
  [[nodiscard]] absl::StatusOr<std::vector<SecretView>> List();
  // Removes the spec and a stored value. kNotFound when there is no such secret.
  [[nodiscard]] absl::Status Remove(const std::string& name);
  // The value now: the stored one, or read from the command or Vault.
  [[nodiscard]] absl::StatusOr<secrets::SecretValue> Resolve(const std::string& name);

  // The default SourceReader: RunSecretCommand / ReadVaultSecret.
  static absl::StatusOr<secrets::SecretValue> ReadSource(const secrets::SecretSpec& spec);

 private:
  absl::StatusOr<secrets::SecretValueStore*> Values();
  absl::StatusOr<SecretView> View(const store::SecretRow& row);

  store::SecretRepo* repo_;
  ValueStoreOpener open_values_;
  SourceReader read_source_;
  absl::Mutex mu_;  // one Set or Remove at a time; guards the lazily opened store
  std::unique_ptr<secrets::SecretValueStore> values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace abox::daemon
