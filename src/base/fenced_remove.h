// Deletes fenced to a root directory: every file abox removes lives under a root it owns
// ($ABOX_HOME, the build cache, a VM's sandboxes dir), and every delete goes through here.
//
// The fence: `root` and `target` are absolute, `target` is lexically normal (no ".", "..", "//")
// and strictly inside `root`. `root` itself is opened as given (it may be a symlink the user
// chose); below it nothing is followed: the directories leading to `target` are resolved with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), or, where the kernel lacks openat2, one
// openat(O_NOFOLLOW) at a time. A symlink on that way is refused, never followed; a symlink
// inside a removed tree is removed as a link and what it points to stays untouched. Removal
// never descends into another mounted file system (a mount point is refused: unmount it first).
//
// A target that does not exist is success, so callers can retry and clean up idempotently.
// Thread-safe (no shared state); a concurrent writer into the tree makes the removal fail
// rather than half-succeed silently.
#pragma once

#include <filesystem>

#include "absl/status/status.h"

namespace abox::base {

struct FenceOptions {
  // How many levels of directories RemoveUnder opens, the target's own included (it holds one
  // descriptor per level); a deeper tree is refused, part-deleted.
  int max_depth = 128;
  // false: resolve with the openat(O_NOFOLLOW) walk even where openat2 works (tests use it to
  // cover the fallback).
  bool use_openat2 = true;
};

// Removes `target` under `root`: a file, a symlink (the link, not what it points to) or a whole
// directory tree. kInvalidArgument when the paths break the fence; kFailedPrecondition for a
// symlinked directory on the way, a mount point inside, or a tree deeper than max_depth.
[[nodiscard]] absl::Status RemoveUnder(const std::filesystem::path& root,
                                       const std::filesystem::path& target,
                                       const FenceOptions& options = {});

// Removes `target` under `root` if it is not a directory (a file, socket, symlink, ...);
// a directory is kFailedPrecondition.
[[nodiscard]] absl::Status RemoveFileUnder(const std::filesystem::path& root,
                                           const std::filesystem::path& target,
                                           const FenceOptions& options = {});

// Removes the empty directory `target` under `root`; kFailedPrecondition when it is not empty
// or not a directory.
[[nodiscard]] absl::Status RemoveEmptyDirUnder(const std::filesystem::path& root,
                                               const std::filesystem::path& target,
                                               const FenceOptions& options = {});

}  // namespace abox::base
