#include "src/secrets/keyring_store.h"

#include <libsecret/secret.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/base/utf8.h"
#include "src/secrets/file_store.h"

namespace abox::secrets {
namespace {

// The item schema. Attribute names are part of the stored data: never rename them.
const SecretSchema* Schema() {
  static const SecretSchema schema = {"dev.abox.Secret",
                                      SECRET_SCHEMA_NONE,
                                      {{"name", SECRET_SCHEMA_ATTRIBUTE_STRING},
                                       {"abox_home", SECRET_SCHEMA_ATTRIBUTE_STRING},
                                       {nullptr, SECRET_SCHEMA_ATTRIBUTE_STRING}}};
  return &schema;
}

// A name that no secret can have (secret names are upper-case): the probe looks it up.
constexpr const char* kProbeName = "abox-probe";

// Cancels `cancellable` when `timeout` passes before the watchdog is destroyed: libsecret's
// sync calls take no timeout, and a bus whose Secret Service never answers would block them for
// D-Bus's default of 25 s (or forever on a hung prompt).
class Watchdog final {
 public:
  Watchdog(GCancellable* cancellable, std::chrono::milliseconds timeout)
      : thread_([this, cancellable, timeout] {
          std::unique_lock lock(mu_);
          if (!cv_.wait_for(lock, timeout, [this] { return done_; })) {
            fired_ = true;
            g_cancellable_cancel(cancellable);
          }
        }) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  bool fired() {
    std::lock_guard lock(mu_);
    return fired_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool fired_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// Runs `call(cancellable, &error)` under a watchdog; turns a GError into a status.
template <typename Call>
absl::Status RunBounded(std::chrono::milliseconds timeout, absl::string_view what, Call call) {
  GCancellable* cancellable = g_cancellable_new();
  absl::Cleanup unref = [cancellable] { g_object_unref(cancellable); };
  GError* error = nullptr;
  bool timed_out = false;
  {
    Watchdog watchdog(cancellable, timeout);
    // libsecret shares GIO's session bus connection, which by default raises SIGTERM in this
    // process when the bus goes away (the user logs out): aboxd must outlive that.
    GDBusConnection* bus = g_bus_get_sync(G_BUS_TYPE_SESSION, cancellable, &error);
    if (bus != nullptr) {
      g_dbus_connection_set_exit_on_close(bus, FALSE);
      g_object_unref(bus);
      call(cancellable, &error);
    }
    timed_out = watchdog.fired();
  }
  if (error == nullptr) {
    return absl::OkStatus();
  }
  std::string message = error->message != nullptr ? error->message : "unknown error";
  g_error_free(error);
  if (timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, ": the keyring (Secret Service) did not answer within ", timeout.count(),
                     " ms; unlock it or check that it runs"));
  }
  return absl::UnavailableError(absl::StrCat(what, ": the keyring (Secret Service) said: ", message,
                                             ". Unlock it or check that it runs"));
}

}  // namespace

absl::Status KeyringValueStore::Probe(const KeyringOptions& options) {
  const char* bus = options.getenv ? options.getenv("DBUS_SESSION_BUS_ADDRESS")
                                   // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only
                                   : std::getenv("DBUS_SESSION_BUS_ADDRESS");
  if (bus == nullptr || *bus == '\0') {
    return absl::UnavailableError("DBUS_SESSION_BUS_ADDRESS is not set (no desktop session)");
  }
  // A lookup of a name no item has: succeeds with nothing found when a Secret Service answers,
  // prompts for nothing, and fails fast without a bus or service.
  return RunBounded(
      options.probe_timeout, "probing the keyring", [&](GCancellable* cancellable, GError** error) {
        gchar* found = secret_password_lookup_sync(Schema(), cancellable, error, "name", kProbeName,
                                                   "abox_home", options.abox_home.c_str(), nullptr);
        secret_password_free(found);
      });
}

std::unique_ptr<KeyringValueStore> KeyringValueStore::Create(KeyringOptions options) {
  return std::unique_ptr<KeyringValueStore>(new KeyringValueStore(std::move(options)));
}

absl::Status KeyringValueStore::Put(const std::string& name, const SecretValue& value) {
  ABOX_RETURN_IF_ERROR(ValidateSecretName(name));
  absl::string_view bytes = value.Reveal();
  bool text = base::IsValidUtf8(bytes) && bytes.find('\0') == absl::string_view::npos;
  ::SecretValue* item_value = secret_value_new(bytes.data(), static_cast<gssize>(bytes.size()),
                                               text ? "text/plain" : "application/octet-stream");
  absl::Cleanup unref = [item_value] { secret_value_unref(item_value); };
  std::string label = absl::StrCat("abox secret ", name);
  return RunBounded(options_.call_timeout, absl::StrCat("storing secret ", name),
                    [&](GCancellable* cancellable, GError** error) {
                      secret_password_store_binary_sync(Schema(), SECRET_COLLECTION_DEFAULT,
                                                        label.c_str(), item_value, cancellable,
                                                        error, "name", name.c_str(), "abox_home",
                                                        options_.abox_home.c_str(), nullptr);
                    });
}

absl::StatusOr<SecretValue> KeyringValueStore::Get(const std::string& name) {
  ::SecretValue* found = nullptr;
  ABOX_RETURN_IF_ERROR(RunBounded(options_.call_timeout, absl::StrCat("reading secret ", name),
                                  [&](GCancellable* cancellable, GError** error) {
                                    found = secret_password_lookup_binary_sync(
                                        Schema(), cancellable, error, "name", name.c_str(),
                                        "abox_home", options_.abox_home.c_str(), nullptr);
                                  }));
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat("no value is stored for secret ", name,
                                            " in the keyring: set it with `abox secret set`"));
  }
  gsize length = 0;
  const gchar* data = secret_value_get(found, &length);
  SecretValue result(std::string(data, length));
  secret_value_unref(found);  // libsecret wipes its (non-pageable) copy
  return result;
}

absl::Status KeyringValueStore::Remove(const std::string& name) {
  gboolean removed = FALSE;
  ABOX_RETURN_IF_ERROR(RunBounded(options_.call_timeout, absl::StrCat("removing secret ", name),
                                  [&](GCancellable* cancellable, GError** error) {
                                    removed = secret_password_clear_sync(
                                        Schema(), cancellable, error, "name", name.c_str(),
                                        "abox_home", options_.abox_home.c_str(), nullptr);
                                  }));
  if (!removed) {
    return absl::NotFoundError(
        absl::StrCat("no value is stored for secret ", name, " in the keyring"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> KeyringValueStore::List() {
  GList* items = nullptr;
  ABOX_RETURN_IF_ERROR(RunBounded(
      options_.call_timeout, "listing secrets", [&](GCancellable* cancellable, GError** error) {
        // Attributes only: no unlock, no secret transferred.
        items = secret_password_search_sync(Schema(), SECRET_SEARCH_ALL, cancellable, error,
                                            "abox_home", options_.abox_home.c_str(), nullptr);
      }));
  std::vector<std::string> names;
  for (GList* item = items; item != nullptr; item = item->next) {
    GHashTable* attributes = secret_retrievable_get_attributes(SECRET_RETRIEVABLE(item->data));
    const auto* name = static_cast<const char*>(g_hash_table_lookup(attributes, "name"));
    if (name != nullptr && ValidateSecretName(name).ok()) {
      names.emplace_back(name);
    }
    g_hash_table_unref(attributes);
  }
  g_list_free_full(items, g_object_unref);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

absl::StatusOr<DefaultValueStore> OpenDefaultValueStore(const std::filesystem::path& dir,
                                                        KeyringOptions options) {
  if (options.abox_home.empty()) {
    std::filesystem::path normal = dir.lexically_normal();
    if (!normal.has_filename()) {  // "…/secrets/"
      normal = normal.parent_path();
    }
    options.abox_home = normal.parent_path().string();
  }
  absl::Status keyring = KeyringValueStore::Probe(options);
  if (keyring.ok()) {
    return DefaultValueStore{KeyringValueStore::Create(std::move(options)), ""};
  }
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<FileValueStore> file, FileValueStore::Open(dir));
  std::string warning = absl::StrCat("no desktop keyring answers (", keyring.message(),
                                     "): secret values are kept in ", file->file().string(),
                                     " (mode 0600), readable by any program running as you");
  return DefaultValueStore{std::move(file), std::move(warning)};
}

}  // namespace abox::secrets
