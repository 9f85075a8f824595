// Three-way text merge for apply: the host's version, the base abox synced into the sandbox and
// the sandbox's version, merged by `git merge-file` (the same algorithm and conflict markers
// people know from git, run on temp files, never in the person's repo).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::workspace {

struct MergeLabels {
  std::string ours = "host";
  std::string base = "base";
  std::string theirs = "sandbox";
};

struct MergeResult {
  bool clean = false;
  // The merged text; with conflict markers when !clean.
  std::string content;
  int conflicts = 0;  // conflicting hunks (git caps the count at 127)
};

// Files this large are not text-merged (they conflict instead).
inline constexpr size_t kMaxMergeBytes = 32 << 20;

// True when `data` looks binary the way git decides it: a NUL byte in the first 8000 bytes.
[[nodiscard]] bool LooksBinary(absl::string_view data);

// Merges `theirs` (sandbox) into `ours` (host) relative to `base`. Conflicts are marked in the
// diff3 style (`<<<<<<< host`, `||||||| base`, `=======`, `>>>>>>> sandbox`): the base section
// shows what each side started from, which is what a person needs to resolve an agent's edit
// against their own. kInvalidArgument for binary input (callers treat binary as a conflict
// without merging), kResourceExhausted beyond kMaxMergeBytes, kInternal when git fails.
[[nodiscard]] absl::StatusOr<MergeResult> MergeText(absl::string_view base, absl::string_view ours,
                                                    absl::string_view theirs,
                                                    const MergeLabels& labels = {});

}  // namespace abox::workspace
