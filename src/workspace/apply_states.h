// Internal to apply and pull planning (apply_plan.cc): what a path is on each side of a plan
// (PathState) and how one state becomes another. Pure functions; nothing here reads the host.
#pragma once

#include <string>

#include "src/workspace/apply.h"
#include "src/workspace/journal.h"
#include "src/workspace/manifest.h"

namespace abox::workspace::apply_internal {

// True when `m` (may be null) lists something beneath `path`. The sync's manifests hold files
// and symlinks only (guest_changes.h), so a directory is in them through what it holds.
[[nodiscard]] bool HoldsBeneath(const Manifest* m, const std::string& path);

// The action that turns `from` into `to` on the host.
[[nodiscard]] PlannedChange::Action ActionFor(const PathState& from, const PathState& to);

// The sandbox's state of a path as it lands on the host: a file mode the sandbox chose (one
// neither the base nor the host has) becomes 0644 or 0755 (HostModeForSandboxFile), so a
// sandbox never makes a host file group- or world-writable. A mode the base or the host
// already has is the person's and stays (an edited 0600 file stays 0600).
[[nodiscard]] PathState AsLanded(PathState guest, const PathState& base, const PathState& host);

// "deleted", "a file", "a symlink", "a directory", "a special file": for conflict reasons.
[[nodiscard]] std::string Describe(const PathState& s);

}  // namespace abox::workspace::apply_internal
