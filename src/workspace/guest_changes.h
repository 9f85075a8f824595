// Reading the agent's work back: the guest's manifest of its workspace (`abox-guest ws
// manifest`), compared with the base the host last synced, and the content of every changed
// file fetched (`abox-guest ws pack`) into the object store, verified against the manifest's
// hashes. Only files and symlinks count (directories are implied); nothing with a `.git`
// component at any depth (HasGitComponent), no secret-looking file, and (in a git tree) no new
// file the host's .gitignore ignores.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/workspace/guest_tools.h"
#include "src/workspace/manifest.h"
#include "src/workspace/store_budget.h"
#include "src/workspace/workspace_state.h"

namespace abox::workspace {

struct GuestChanges {
  Manifest base;   // the base, files and symlinks only, filtered like `guest`
  Manifest guest;  // the guest's files and symlinks; changed files' content is in the store
  ManifestChanges changes;
  // New guest files left out by .gitignore, the secret excludes or as a nested repository's
  // git state.
  size_t ignored = 0;
};

// `paths`: only these files or directories (relative to the workspace root); empty = all.
// A path that names no change and no file on either side is an error. What the guest's content
// may take of the host's disk is `budget` (store_budget.h); objects nothing refers to any more
// are collected first.
[[nodiscard]] absl::StatusOr<GuestChanges> FetchGuestChanges(WorkspaceState& state,
                                                             GuestTools& tools,
                                                             const std::vector<std::string>& paths,
                                                             const StoreBudget& budget);

// Where the guest keeps its manifest stat cache (a root-only tmpfs).
inline constexpr char kGuestStatCache[] = "/run/abox/ws-stat-cache";

}  // namespace abox::workspace
