// The workspace routes' bodies and answers: POST .../sync (SyncReport), GET .../diff (Diff),
// POST .../apply and .../pull (ApplyRequest, PullRequest -> ApplyResult), GET /v1/artifacts
// (Artifact) and POST /v1/artifacts/{id}/undo (UndoRequest -> UndoResult).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace abox::api {

// What a sync into the guest did.
struct SyncReport {
  bool changed = false;  // false: nothing to send
  int64_t files = 0;     // written in the guest
  int64_t deleted = 0;
  int64_t total_files = 0;
  int64_t bytes = 0;          // content bytes sent
  int64_t archive_bytes = 0;  // compressed bytes on the channel
  int64_t hashed = 0;
  std::vector<std::string> excluded;  // secret-looking paths left out
  std::vector<std::string> notes;
  int64_t duration_ms = 0;

  friend bool operator==(const SyncReport&, const SyncReport&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const SyncReport& report);
[[nodiscard]] absl::StatusOr<SyncReport> DecodeSyncReport(const nlohmann::json& value);

// One changed path of a diff.
struct FileDiff {
  std::string path;
  std::string status;  // added | modified | deleted | type_changed
  std::string old_kind;
  std::string new_kind;
  int64_t old_mode = 0;
  int64_t new_mode = 0;
  bool binary = false;
  int64_t additions = 0;
  int64_t deletions = 0;
  std::optional<std::string> exec_sensitive;  // why applying it needs allow_exec_files
  std::string patch;                          // sent when not empty
  // Never sent by aboxd: `abox diff --json` adds whether the path or patch holds a control
  // character (sent when set).
  std::optional<bool> control_characters;

  friend bool operator==(const FileDiff&, const FileDiff&) = default;
};
struct Diff {
  std::vector<FileDiff> files;
  int64_t ignored = 0;  // new files left out by .gitignore or the secret excludes

  friend bool operator==(const Diff&, const Diff&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const Diff& diff);
[[nodiscard]] absl::StatusOr<Diff> DecodeDiff(const nlohmann::json& value);

// POST .../apply.
struct ApplyRequest {
  std::vector<std::string> paths;  // empty: every change
  bool dry_run = false;
  bool markers = false;  // "conflicts": "markers" (write them) instead of "refuse"
  bool allow_exec_files = false;

  friend bool operator==(const ApplyRequest&, const ApplyRequest&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const ApplyRequest& request);
[[nodiscard]] absl::StatusOr<ApplyRequest> DecodeApplyRequest(absl::string_view body);

// POST .../pull.
struct PullRequest {
  std::vector<std::string> paths;  // at least one
  std::string to;                  // another host directory; empty: the bound one
  bool force = false;

  friend bool operator==(const PullRequest&, const PullRequest&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const PullRequest& request);
[[nodiscard]] absl::StatusOr<PullRequest> DecodePullRequest(absl::string_view body);

// One planned change of an apply or pull.
struct PlannedChange {
  std::string path;
  std::string action;  // write, merge, delete, ..., conflict, skip_exec_file, already_done
  std::string reason;
  bool exec_sensitive = false;
  bool markers = false;  // written with conflict markers (sent when true)

  friend bool operator==(const PlannedChange&, const PlannedChange&) = default;
};
struct ApplyResult {
  std::string kind;  // apply | pull
  bool dry_run = false;
  std::vector<PlannedChange> changes;
  std::vector<std::string> conflicts;
  std::vector<std::string> exec_files_refused;
  int64_t written = 0;
  std::vector<std::string> unresolved;
  std::vector<std::string> notes;
  std::string artifact;  // the backup to undo with; empty (null on the wire) when none

  friend bool operator==(const ApplyResult&, const ApplyResult&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const ApplyResult& result);
[[nodiscard]] absl::StatusOr<ApplyResult> DecodeApplyResult(const nlohmann::json& value);

// A backup kept by an apply or pull (GET /v1/artifacts: {"artifacts": [...]}).
struct Artifact {
  std::string id;
  std::string created_at;
  std::string sandbox;
  std::string host_root;
  std::string kind;
  std::string state;
  int64_t files = 0;

  friend bool operator==(const Artifact&, const Artifact&) = default;
};
[[nodiscard]] nlohmann::json ArtifactListToJson(const std::vector<Artifact>& artifacts);
[[nodiscard]] absl::StatusOr<std::vector<Artifact>> DecodeArtifactList(const nlohmann::json& value);

// POST /v1/artifacts/{id}/undo: {"force": bool}.
[[nodiscard]] nlohmann::json UndoRequestToJson(bool force);
[[nodiscard]] absl::StatusOr<bool> DecodeUndoRequest(absl::string_view body);

struct UndoResult {
  std::string id;
  int64_t files = 0;  // restored
  std::vector<std::string> notes;

  friend bool operator==(const UndoResult&, const UndoResult&) = default;
};
[[nodiscard]] nlohmann::json ToJson(const UndoResult& result);
[[nodiscard]] absl::StatusOr<UndoResult> DecodeUndoResult(const nlohmann::json& value);

}  // namespace abox::api
