// The workspace copies of `abox run -w`: $ABOX_HOME/tmp/run-workspace-<id>/, each beside a
// run-workspace-<id>.lock that its run holds (flock) for as long as the copy exists. A copy whose
// lock nobody holds was left by a killed run: `abox run` and aboxd's start collect them.
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"

namespace abox::workspace {

inline constexpr char kRunCopyPrefix[] = "run-workspace-";
inline constexpr char kRunCopyLockSuffix[] = ".lock";

// Takes the exclusive flock on `lock_path` (creating the file), waiting for it or not. A lock
// is only good while the file is still at its path: a collector unlinks the lock file of a copy
// it removed, so a lock taken on a file unlinked meanwhile is dropped and taken again.
// kUnavailable (with `wait` false) when another process holds it.
[[nodiscard]] absl::StatusOr<base::UniqueFd> LockRunCopy(const std::string& lock_path, bool wait);

// Removes the copies under <home>/tmp whose run is gone (their lock is free), and their lock
// files. A copy whose lock is held is never touched. Returns how many copies it removed.
[[nodiscard]] absl::StatusOr<int> CollectRunLeftovers(const std::filesystem::path& home);

}  // namespace abox::workspace
