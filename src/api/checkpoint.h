// Checkpoints, restore and fork: POST/GET /v1/sandboxes/{id}/checkpoints,
// DELETE /v1/sandboxes/{id}/checkpoints/{checkpoint}, POST /v1/sandboxes/{id}/restore,
// POST /v1/sandboxes/{id}/fork.
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

struct Checkpoint {
  std::string id;    // "ck" + 10 hex characters
  std::string name;  // the given name, else the id
  std::string sandbox_id;
  std::string image;
  int64_t cpus = 0;
  int64_t memory_mib = 0;
  std::optional<absl::Time> created_at;
  int64_t bytes = 0;    // on the host's disk
  int64_t save_ms = 0;  // how long the sandbox was paused for it
  bool workspace = false;

  friend bool operator==(const Checkpoint&, const Checkpoint&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const Checkpoint& checkpoint);
[[nodiscard]] absl::StatusOr<Checkpoint> DecodeCheckpoint(const nlohmann::json& value);
// {"checkpoints": [...]}
[[nodiscard]] absl::StatusOr<std::vector<Checkpoint>> DecodeCheckpointList(
    const nlohmann::json& value);

// POST .../checkpoints body: {"name": "..."} (optional; the sandbox-name rules).
struct CheckpointCreate {
  std::string name;
};
[[nodiscard]] nlohmann::json ToJson(const CheckpointCreate& create);
[[nodiscard]] absl::StatusOr<CheckpointCreate> DecodeCheckpointCreate(absl::string_view body);

// POST .../restore body: {"checkpoint": "<id, name or id prefix>"}.
struct RestoreRequest {
  std::string checkpoint;
};
[[nodiscard]] nlohmann::json ToJson(const RestoreRequest& request);
[[nodiscard]] absl::StatusOr<RestoreRequest> DecodeRestoreRequest(absl::string_view body);

inline constexpr int64_t kMaxForkCount = 32;
// POST .../fork body: {"count": 1-32 (default 1), "name_prefix": "..."}.
struct ForkRequest {
  int64_t count = 1;
  std::string name_prefix;
};
[[nodiscard]] nlohmann::json ToJson(const ForkRequest& request);
[[nodiscard]] absl::StatusOr<ForkRequest> DecodeForkRequest(absl::string_view body);

}  // namespace abox::api
