// The user's host tree, as abox may touch it: the ONE place the workspace guards are enforced
// before a byte of the person's repo is read for an apply or written by apply / pull / undo.
//
// Every operation takes a relative path (from a guest manifest: untrusted) and
//   - refuses what ValidateRelativePath refuses (absolute, "..", empty components, control
//     characters such as a newline) and any path with a `.git` component at any depth,
//     compared case-insensitively (HasGitComponent: abox never touches git's state, the root's
//     or a nested repository's: no index, no refs, no hooks, no config whose core.fsmonitor
//     would run on the next `git status`; it never runs git here either);
//   - resolves the path beneath the root WITHOUT following symlinks: openat2(RESOLVE_BENEATH |
//     RESOLVE_NO_SYMLINKS) on the parent directory, or a per-component openat(O_NOFOLLOW) walk
//     where openat2 is missing. A path through a symlink (host `link -> /etc`, path
//     `link/passwd`) is refused with kFailedPrecondition naming the link, never followed; the
//     final component is never followed either (a symlink there is read / replaced as a link).
// Writes are atomic (temp file `.abox-tmp-<random>` in the same directory, fsync, rename over,
// fsync the directory) and never replace a directory, device, fifo or socket. Modes written are
// masked to 0777: setuid / setgid / sticky bits are never set. The mode a file from a sandbox
// gets is chosen while planning (HostModeForSandboxFile), not here: undo writes the person's
// own files back through the same calls, with the modes they had.
//
// Not thread-safe for concurrent writes to the same path; the tree is otherwise shared with the
// person, who may edit it at any time (callers re-check state right before they write).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/base/unique_fd.h"

namespace abox::workspace {

class ObjectStore;

// What a host path holds right now.
struct HostState {
  enum class Kind { kAbsent, kFile, kSymlink, kDir, kOther };
  Kind kind = Kind::kAbsent;
  uint32_t mode = 0;        // files: permission bits (st_mode & 07777)
  uint64_t size = 0;        // files
  std::string sha256;       // files
  std::string link_target;  // symlinks
  std::string other_type;   // kOther: "fifo", "socket", "character device", "block device"
  // kAbsent because this ancestor (relative path) is a file, not a directory.
  std::string blocked_by;

  // Short description for messages ("file 0644 3 bytes", "symlink -> x", "fifo").
  [[nodiscard]] std::string Describe() const;
};

// The mode a file gets on the host when the sandbox chose it (a new file, or a mode the sandbox
// changed): 0755 when the sandbox set any execute bit, else 0644. Group and world write bits,
// setuid, setgid and sticky never come from a sandbox. (A mode the host already had stays.)
[[nodiscard]] constexpr uint32_t HostModeForSandboxFile(uint32_t sandbox_mode) {
  return (sandbox_mode & 0111) != 0 ? 0755 : 0644;
}

// Every symlink of a host tree: relative path (as named on disk, any bytes) -> target.
using HostSymlinks = std::map<std::string, std::string, std::less<>>;

struct HostTreeOptions {
  // false: always resolve with the openat(O_NOFOLLOW) walk (tests cover the fallback).
  bool use_openat2 = true;
};

class HostTree final {
 public:
  // Opens the tree at `root` (absolute; the root itself may be a symlink the person chose).
  [[nodiscard]] static absl::StatusOr<HostTree> Open(const std::string& root,
                                                     const HostTreeOptions& options = {});

  HostTree(HostTree&&) = default;
  HostTree& operator=(HostTree&&) = default;
  HostTree(const HostTree&) = delete;
  HostTree& operator=(const HostTree&) = delete;

  [[nodiscard]] const std::string& root() const { return root_; }

  // OK when `rel` passes the path guards (no I/O).
  [[nodiscard]] static absl::Status CheckPath(absl::string_view rel);

  // The state of `rel` (hashing files). A symlink on the way is an error.
  [[nodiscard]] absl::StatusOr<HostState> Read(absl::string_view rel) const;
  // Opens the regular file `rel` for reading (kFailedPrecondition when it is not one).
  [[nodiscard]] absl::StatusOr<base::UniqueFd> OpenFile(absl::string_view rel) const;
  // Names in directory `rel` ("" for the root), sorted.
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> List(absl::string_view rel) const;
  // Every symlink beneath the root, found without following any (readdir types, lstat where
  // the file system gives none) and without hashing a file. Directories named `.git` (any
  // case, any depth) are not entered: abox never writes there and nothing it writes resolves
  // through them. kResourceExhausted for a tree deeper than kMaxSymlinkWalkDepth directories.
  [[nodiscard]] absl::StatusOr<HostSymlinks> Symlinks() const;
  static constexpr int kMaxSymlinkWalkDepth = 512;

  // Atomically writes `content` to `rel` with `mode`, creating missing parent directories
  // (0755; appended to `created_dirs`, shallowest first, when not null).
  [[nodiscard]] absl::Status WriteFile(absl::string_view rel, absl::string_view content,
                                       uint32_t mode,
                                       std::vector<std::string>* created_dirs = nullptr);
  // Same with the content of object `sha256`, verified while it is copied (kDataLoss if the
  // object does not hash to its name; the host file is then left untouched).
  [[nodiscard]] absl::Status WriteObject(absl::string_view rel, const ObjectStore& objects,
                                         absl::string_view sha256, uint32_t mode,
                                         std::vector<std::string>* created_dirs = nullptr);
  // Atomically makes `rel` a symlink to `target` (stored as given, never resolved).
  [[nodiscard]] absl::Status WriteSymlink(absl::string_view rel, absl::string_view target,
                                          std::vector<std::string>* created_dirs = nullptr);
  // Creates directory `rel` (and missing parents); OK when it already is a directory.
  [[nodiscard]] absl::Status MakeDir(absl::string_view rel,
                                     std::vector<std::string>* created_dirs = nullptr);
  // Removes the file or symlink `rel` (never what a link points to); OK when absent;
  // kFailedPrecondition for a directory.
  [[nodiscard]] absl::Status Remove(absl::string_view rel);
  // Removes directory `rel` if empty; OK when absent; kFailedPrecondition when not empty.
  [[nodiscard]] absl::Status RemoveEmptyDir(absl::string_view rel);
  // Removes `.abox-tmp-*` files an interrupted write left in directory `rel` ("" = root).
  [[nodiscard]] absl::Status RemoveStaleTemps(absl::string_view rel);

 private:
  HostTree(std::string root, base::UniqueFd root_fd, HostTreeOptions options)
      : root_(std::move(root)), root_fd_(std::move(root_fd)), options_(options) {}

  struct Parent;
  // Resolves the directory holding `rel`'s last component (see the file comment).
  absl::StatusOr<Parent> ResolveParent(absl::string_view rel, bool create,
                                       std::vector<std::string>* created_dirs) const;
  // The atomic write: `make` creates the temp entry `tmp` in the parent directory, which is
  // then renamed over `rel` and synced.
  absl::Status WriteWith(absl::string_view rel,
                         const std::function<absl::Status(int dir_fd, const char* tmp)>& make,
                         std::vector<std::string>* created_dirs);

  std::string root_;
  base::UniqueFd root_fd_;
  HostTreeOptions options_;
};

}  // namespace abox::workspace
