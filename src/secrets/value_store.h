// Where abox keeps the values of stored secrets (SourceKind::kStored): the desktop keyring when a
// Secret Service answers, else a 0600 file under $ABOX_HOME (keyring_store.h chooses).
//
// Only values live here, keyed by secret name; the specs (hosts, header, source) are aboxd's
// state. Errors never contain a value.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/secrets/secret.h"

namespace abox::secrets {

// Implementations are thread-safe.
class SecretValueStore {
 public:
  virtual ~SecretValueStore() = default;

  // Stores `value` under `name` (a valid secret name), replacing any earlier value.
  [[nodiscard]] virtual absl::Status Put(const std::string& name, const SecretValue& value) = 0;
  // The value stored under `name`; NotFound when there is none.
  [[nodiscard]] virtual absl::StatusOr<SecretValue> Get(const std::string& name) = 0;
  // Removes the value; NotFound when there was none.
  [[nodiscard]] virtual absl::Status Remove(const std::string& name) = 0;
  // Names with a stored value, sorted.
  [[nodiscard]] virtual absl::StatusOr<std::vector<std::string>> List() = 0;
  // Where values go, for people: "keyring" or "file /home/me/.local/share/abox/secrets/...".
  [[nodiscard]] virtual std::string Describe() const = 0;
};

}  // namespace abox::secrets
