// A secret as abox knows it: its spec (name, the hosts it is bound to, how it goes into a request,
// where its value comes from) and its value, which has no way to be printed.
//
// The spec is plain data, safe to store, log and show. The value lives only in a SecretValue:
// reachable through Reveal(), zeroed when destroyed, printed as "<redacted>" by fmt/spdlog and
// gtest, and never convertible to a string by accident.
#pragma once

#include <chrono>
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fmt/format.h"
#include "nlohmann/json_fwd.hpp"

namespace abox::secrets {

// Bytes that must not leak. Move-only (Clone() copies on purpose); the memory that held the
// value is overwritten when the object is destroyed or moved from. There is no operator<< and
// no conversion to a string: the one way to the bytes is Reveal(), so every use can be found.
class SecretValue final {
 public:
  SecretValue() = default;
  // Takes `value`; what the argument held is wiped (pass it with std::move).
  explicit SecretValue(std::string value);
  SecretValue(SecretValue&& other) noexcept;
  SecretValue& operator=(SecretValue&& other) noexcept;
  SecretValue(const SecretValue&) = delete;
  SecretValue& operator=(const SecretValue&) = delete;
  ~SecretValue();

  // The value. Do not keep the view beyond this object's life, and never log it.
  [[nodiscard]] absl::string_view Reveal() const { return value_; }
  [[nodiscard]] size_t size() const { return value_.size(); }
  [[nodiscard]] bool empty() const { return value_.empty(); }
  [[nodiscard]] SecretValue Clone() const { return SecretValue(std::string(value_)); }
  // Compares in time independent of where the values differ (CRYPTO_memcmp).
  [[nodiscard]] bool Equals(const SecretValue& other) const;

  // gtest prints values through this, never the bytes.
  friend void PrintTo(const SecretValue& /*value*/, std::ostream* os) { *os << "<redacted>"; }
  // absl::StrCat / StrFormat (abseil versions with AbslStringify) print "<redacted>" too.
  template <typename Sink>
  friend void AbslStringify(Sink& sink, const SecretValue& /*value*/) {
    sink.Append("<redacted>");
  }

 private:
  std::string value_;
};

// Overwrites a string's whole buffer (its capacity, not only its size) and empties it.
void Cleanse(std::string& text);
// Cleanse()s every string in a JSON document (values and keys are left in place, emptied).
void CleanseJson(nlohmann::json& json);

// Where a secret's value comes from.
enum class SourceKind {
  kStored,   // abox keeps it (keyring or the 0600 file): `abox secret set --stdin` etc.
  kCommand,  // a command prints it, run on each use (a password manager's CLI)
  kVault,    // HashiCorp Vault KV v2, read on each use
};
[[nodiscard]] absl::string_view SourceKindName(SourceKind kind);

// A command that prints the value on stdout. argv, no shell.
struct CommandReference {
  std::vector<std::string> argv;
  std::chrono::milliseconds timeout{10'000};
};

// A KV v2 field: GET {addr}/v1/{mount}/data/{path}, field {key} of data.data.
struct VaultReference {
  std::string addr;  // empty: $VAULT_ADDR when it is read
  std::string mount = "secret";
  std::string path;
  std::string key;
};

// What abox stores about a secret. Never holds the value.
struct SecretSpec {
  // Environment-variable-like: [A-Z_][A-Z0-9_]{0,63}.
  std::string name;
  // Hosts the value may be sent to: lowercase DNS names, optionally "*." in front (subdomains
  // only, not the name itself) and ":port" behind.
  std::vector<std::string> hosts;
  // The request header that carries the value, and its form: "{}" is replaced by the value.
  std::string header = "Authorization";
  std::string format = "Bearer {}";
  // Whether the placeholder is also replaced in the URL query (off: a query string is logged by
  // servers and proxies far more often than a header).
  bool allow_query = false;
  SourceKind source = SourceKind::kStored;
  CommandReference command;  // source == kCommand
  VaultReference vault;      // source == kVault
};

inline constexpr size_t kMaxSecretNameLength = 64;

// Each returns InvalidArgument saying what is wrong and what is accepted.
[[nodiscard]] absl::Status ValidateSecretName(absl::string_view name);
[[nodiscard]] absl::Status ValidateHostPattern(absl::string_view pattern);
[[nodiscard]] absl::Status ValidateHeaderName(absl::string_view header);
[[nodiscard]] absl::Status ValidateFormat(absl::string_view format);
[[nodiscard]] absl::Status ValidateCommandReference(const CommandReference& command);
[[nodiscard]] absl::Status ValidateVaultReference(const VaultReference& vault);
// Every field, including the source's reference.
[[nodiscard]] absl::Status ValidateSecretSpec(const SecretSpec& spec);

// JSON form (what aboxd stores and the API carries):
//   {"name": "GH_TOKEN", "hosts": ["api.github.com"], "header": "Authorization",
//    "format": "Bearer {}", "allow_query": false,
//    "source": {"kind": "stored"} | {"kind": "command", "argv": [...], "timeout_ms": 10000}
//            | {"kind": "vault", "addr": "", "mount": "secret", "path": "ci/gh", "key": "token"}}
[[nodiscard]] nlohmann::json SecretSpecToJson(const SecretSpec& spec);
// Missing optional fields take their defaults; unknown fields are refused (a typo would
// otherwise silently fall back to a default); the result is validated.
[[nodiscard]] absl::StatusOr<SecretSpec> SecretSpecFromJson(const nlohmann::json& json);
// Parses JSON text (no exceptions) then SecretSpecFromJson.
[[nodiscard]] absl::StatusOr<SecretSpec> ParseSecretSpec(absl::string_view text);

}  // namespace abox::secrets

// spdlog and fmt print a SecretValue as "<redacted>".
template <>
struct fmt::formatter<abox::secrets::SecretValue> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const abox::secrets::SecretValue& /*value*/, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format("<redacted>", ctx);
  }
};
