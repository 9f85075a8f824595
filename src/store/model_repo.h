// The model broker's tables (issue 16): where each model API is sent and which secret holds its
// key (`abox agent login`; never the key itself), and what each sandbox's agents used through
// the broker (requests, errors, refusals, tokens read from the responses).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/store/database.h"

namespace abox::store {

struct ModelProviderRow {
  std::string api;       // "anthropic" | "openai"
  std::string secret;    // the secret whose value is the API key
  std::string base_url;  // where the broker sends the API's requests
  absl::Time updated_at;

  friend bool operator==(const ModelProviderRow&, const ModelProviderRow&) = default;
};

struct ModelUsageRow {
  std::string sandbox_id;
  std::string api;
  uint64_t requests = 0;  // forwarded to the provider
  uint64_t errors = 0;    // forwarded and answered with a status >= 400, or failed
  uint64_t refused = 0;   // answered by the broker itself (token, route, limits, no key)
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  absl::Time last_at = absl::UnixEpoch();

  friend bool operator==(const ModelUsageRow&, const ModelUsageRow&) = default;
};

class ModelRepo final {
 public:
  explicit ModelRepo(Database& db, Clock clock = absl::Now) : db_(&db), clock_(std::move(clock)) {}

  // Adds or replaces the provider of `row.api` (updated_at is set now).
  [[nodiscard]] absl::StatusOr<ModelProviderRow> PutProvider(const ModelProviderRow& row);
  // nullopt when the API has no provider set.
  [[nodiscard]] absl::StatusOr<std::optional<ModelProviderRow>> GetProvider(absl::string_view api);
  [[nodiscard]] absl::StatusOr<std::vector<ModelProviderRow>> ListProviders();
  // kNotFound when there was none.
  [[nodiscard]] absl::Status DeleteProvider(absl::string_view api);

  // Adds `delta`'s counters to the sandbox's row for its API (made on first use); last_at is
  // set now. The sandbox must exist.
  [[nodiscard]] absl::Status AddUsage(const ModelUsageRow& delta);
  // Its rows by API; empty when its agents used nothing.
  [[nodiscard]] absl::StatusOr<std::vector<ModelUsageRow>> Usage(absl::string_view sandbox_id);

 private:
  Database* db_;
  Clock clock_;
};

}  // namespace abox::store
