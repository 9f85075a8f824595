// Secrets: POST /v1/secrets (add or replace), GET /v1/secrets, GET /v1/secrets/{name},
// DELETE /v1/secrets/{name}.
//
// A secret's spec (name, hosts, header, format, allow_query, source) is src/secrets' JSON form,
// which aboxd validates; this layer carries it as an object. A stored secret's value travels
// only in the POST body (the unix socket, never argv) and is never in an answer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace abox::api {

inline constexpr size_t kMaxSecretValueBytes = 8192;

struct Secret {
  std::string name;
  nlohmann::json spec = nlohmann::json::object();  // src/secrets' SecretSpecToJson
  std::string source;                              // "stored" | "command" | "vault"
  std::string stored_in;  // for "stored": "keyring" or "file <path>"; else empty
  std::optional<absl::Time> created_at;
  std::optional<absl::Time> updated_at;
  std::vector<std::string> used_by;  // ids of the sandboxes given it (not removed)

  friend bool operator==(const Secret&, const Secret&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const Secret& secret);
[[nodiscard]] absl::StatusOr<Secret> DecodeSecret(const nlohmann::json& value);
// {"secrets": [...]}
[[nodiscard]] absl::StatusOr<std::vector<Secret>> DecodeSecretList(const nlohmann::json& value);

// POST /v1/secrets body: {"spec": {...}, "value": "..."}; value only for a stored secret (at
// most kMaxSecretValueBytes).
struct SecretSet {
  nlohmann::json spec = nlohmann::json::object();
  std::optional<std::string> value;
};
[[nodiscard]] nlohmann::json ToJson(const SecretSet& set);
[[nodiscard]] absl::StatusOr<SecretSet> DecodeSecretSet(absl::string_view body);

}  // namespace abox::api
