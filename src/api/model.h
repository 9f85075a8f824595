// The model broker (issue 16): GET /v1/models/providers, PUT and DELETE
// /v1/models/providers/{api} (where an API is sent and which secret holds its key; never the
// key), and GET /v1/sandboxes/{id}/models/usage (what a sandbox's agents used).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace abox::api {

struct ModelProvider {
  std::string api;          // "anthropic" | "openai"
  std::string secret;       // the secret holding the key
  std::string base_url;     // where the broker sends the API's requests
  bool configured = false;  // set up with PUT (else the defaults)
  bool key_stored = false;  // the secret exists
  std::optional<absl::Time> updated_at;

  friend bool operator==(const ModelProvider&, const ModelProvider&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const ModelProvider& provider);
[[nodiscard]] absl::StatusOr<ModelProvider> DecodeModelProvider(const nlohmann::json& value);
// {"providers": [...]}
[[nodiscard]] absl::StatusOr<std::vector<ModelProvider>> DecodeModelProviderList(
    const nlohmann::json& value);

// PUT body: {"secret": "...", "base_url": "..."} (base_url optional: keep the current one).
struct ModelProviderSet {
  std::string secret;
  std::string base_url;

  friend bool operator==(const ModelProviderSet&, const ModelProviderSet&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const ModelProviderSet& set);
[[nodiscard]] absl::StatusOr<ModelProviderSet> DecodeModelProviderSet(absl::string_view body);

struct ModelUsage {
  std::string api;
  int64_t requests = 0;
  int64_t errors = 0;
  int64_t refused = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  std::optional<absl::Time> last_at;

  friend bool operator==(const ModelUsage&, const ModelUsage&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const ModelUsage& usage);
// {"sandbox_id": "...", "usage": [...]}
[[nodiscard]] absl::StatusOr<std::vector<ModelUsage>> DecodeModelUsageList(
    const nlohmann::json& value);

}  // namespace abox::api
