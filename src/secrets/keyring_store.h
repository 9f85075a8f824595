// The desktop keyring as a value store (libsecret, the freedesktop Secret Service over D-Bus), and
// the choice between it and the file store.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/base/host_layout.h"
#include "src/secrets/value_store.h"

namespace abox::secrets {

struct KeyringOptions {
  // Stored as the item attribute "abox_home" beside "name", so two abox homes of one user keep
  // their secrets apart.
  std::string abox_home;
  // Environment lookup (tests inject one); unset means ::getenv.
  base::GetEnvFn getenv;
  // How long the probe waits for the Secret Service to answer.
  std::chrono::milliseconds probe_timeout{3'000};
  // How long a store call may take: storing or reading can wait on an unlock prompt.
  std::chrono::milliseconds call_timeout{120'000};
};

// Items of schema "dev.abox.Secret" with attributes name and abox_home, labelled
// "abox secret NAME", in the default collection (the login keyring). Values are stored as bytes
// (content type text/plain when they are UTF-8 text).
//
// Each call is synchronous and bounded by call_timeout (a watchdog cancels it). Thread-safe:
// libsecret's sync calls run on a private main context per call.
class KeyringValueStore final : public SecretValueStore {
 public:
  // OK when a Secret Service answers on the session bus within probe_timeout; otherwise why not
  // (no DBUS_SESSION_BUS_ADDRESS, no bus, no service, timed out). Never prompts.
  [[nodiscard]] static absl::Status Probe(const KeyringOptions& options);
  [[nodiscard]] static bool Available(const KeyringOptions& options) { return Probe(options).ok(); }
  // Does no I/O: pair with Probe().
  [[nodiscard]] static std::unique_ptr<KeyringValueStore> Create(KeyringOptions options);

  absl::Status Put(const std::string& name, const SecretValue& value) override;
  absl::StatusOr<SecretValue> Get(const std::string& name) override;
  absl::Status Remove(const std::string& name) override;
  absl::StatusOr<std::vector<std::string>> List() override;
  // "keyring"
  [[nodiscard]] std::string Describe() const override { return "keyring"; }

 private:
  explicit KeyringValueStore(KeyringOptions options) : options_(std::move(options)) {}

  KeyringOptions options_;
};

struct DefaultValueStore {
  std::unique_ptr<SecretValueStore> store;
  // Empty with the keyring; with the file store, one line for the caller to print.
  std::string warning;
};

// The keyring when one answers, else the file store in `dir` (aboxd passes $ABOX_HOME/secrets)
// plus a warning saying why and where values go. options.abox_home defaults to dir's parent.
[[nodiscard]] absl::StatusOr<DefaultValueStore> OpenDefaultValueStore(
    const std::filesystem::path& dir, KeyringOptions options = {});

}  // namespace abox::secrets
