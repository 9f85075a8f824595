// `abox diff`: the guest's changes against the synced base as a unified diff (git's format,
// hunks computed by `git diff --no-index`), with binary, mode, symlink and type changes, line
// counts for --stat, and files that make code run elsewhere (CI, Makefile, hooks...) flagged.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/workspace/guest_changes.h"
#include "src/workspace/object_store.h"

namespace abox::workspace {

struct FileDiff {
  std::string path;
  std::string status;    // added | modified | deleted | type_changed
  std::string old_kind;  // file | symlink | "" (absent)
  std::string new_kind;
  uint32_t old_mode = 0;
  uint32_t new_mode = 0;
  bool binary = false;
  int additions = 0;
  int deletions = 0;
  std::optional<std::string> exec_sensitive;  // why applying it needs --allow-exec-files
  std::string patch;  // git-style: "diff --git" header, mode lines, ---/+++ and hunks
};

struct DiffOptions {
  bool patches = true;  // false: counts only (--stat)
  int context_lines = 3;
  size_t max_text_bytes = size_t{16} << 20;  // larger files are summarized as binary
};

// One entry per changed path, sorted by path.
[[nodiscard]] absl::StatusOr<std::vector<FileDiff>> RenderDiff(const ObjectStore& objects,
                                                               const GuestChanges& changes,
                                                               const DiffOptions& options = {});

// "git diff --stat"-like summary lines plus a total line.
[[nodiscard]] std::string FormatDiffStat(const std::vector<FileDiff>& diffs);

}  // namespace abox::workspace
