// Building a manifest from a directory tree on disk (host: the user's repo; guest: /workspace,
// through `abox-guest ws manifest`), with a stat cache so an unchanged file is not hashed again.
//
// Nothing below `root` is followed: directories are opened with O_NOFOLLOW | O_DIRECTORY one
// level at a time (or with openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS for an explicit path),
// symlinks are recorded as links, and sockets, fifos and devices are skipped. The tree may be
// written to while it is scanned (the agent keeps working): an entry that changes under the
// scan is recorded as it was seen, never followed out of the tree. Not thread-safe per cache.
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
#include "src/workspace/manifest.h"

namespace abox::workspace {

// What a file looked like when it was hashed. A file whose size, mtime, ctime, inode and mode
// all still match is not read again (ctime cannot be set from user space, so a rewrite that
// restores the mtime is still noticed).
struct StatCacheEntry {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t ino = 0;
  uint32_t mode = 0;  // the full st_mode
  std::string sha256;
};

// Path -> StatCacheEntry, persisted between scans. The cache only saves work: a missing,
// unreadable or corrupt cache file loads as an empty cache. Whoever can write the cache file can
// make a scan report a stale hash, so keep it where the scanned tree's writers cannot reach.
class StatCache final {
 public:
  StatCache() = default;

  // Replaces the contents with those of `path` (empty when it is missing or corrupt).
  void Load(const std::string& path);
  // Writes the cache atomically (temp file + rename).
  [[nodiscard]] absl::Status Save(const std::string& path) const;

  // The entry for `rel` if it matches `current` in every stat field, else null.
  [[nodiscard]] const StatCacheEntry* Match(const std::string& rel,
                                            const StatCacheEntry& current) const;
  void Put(const std::string& rel, StatCacheEntry entry);
  void Erase(const std::string& rel) { entries_.erase(rel); }
  // Drops every path that `keep` does not list as a file (after a full scan).
  void Retain(const Manifest& keep);

  [[nodiscard]] size_t size() const { return entries_.size(); }
  // How many files the scans hashed and how many they took from the cache.
  [[nodiscard]] uint64_t hashed() const { return hashed_; }
  [[nodiscard]] uint64_t reused() const { return reused_; }
  void CountHashed() { ++hashed_; }
  void CountReused() { ++reused_; }

 private:
  std::map<std::string, StatCacheEntry> entries_;
  uint64_t hashed_ = 0;
  uint64_t reused_ = 0;
};

// What a scan left out, and why.
struct ScanStats {
  uint64_t special = 0;  // sockets, fifos, devices
  uint64_t invalid = 0;  // names ValidateRelativePath refuses (and what is below them)
  uint64_t missing = 0;  // ScanPaths: listed paths that do not exist (or lie behind a symlink)
  // "<escaped path>: <why>", the first kMaxReported of them.
  std::vector<std::string> skipped;
  static constexpr size_t kMaxReported = 100;
};

struct ScanOptions {
  StatCache* cache = nullptr;  // optional
  // Optional: true leaves `rel` out (an excluded directory is not descended).
  std::function<bool(absl::string_view rel, bool is_dir)> exclude;
  ScanStats* stats = nullptr;  // optional
  // false: files get no hash (ws pack only needs to know what exists).
  bool hash_files = true;
  // ScanPaths: add each listed path's parent directories as kDir entries.
  bool add_parents = true;
};

// Every entry below `root` (not `root` itself).
[[nodiscard]] absl::StatusOr<Manifest> ScanTree(const std::string& root,
                                                const ScanOptions& options);

// The listed relative paths (and, with add_parents, their parent directories). A listed
// directory is recorded, not descended. Paths are resolved beneath `root` without following
// symlinks; a path that does not exist, or only through a symlink, is skipped (stats->missing).
[[nodiscard]] absl::StatusOr<Manifest> ScanPaths(const std::string& root,
                                                 const std::vector<std::string>& paths,
                                                 const ScanOptions& options);

// Opens the directory `rel` ("" = root_fd itself) beneath `root_fd` without following any
// symlink: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), or one openat(O_NOFOLLOW) per
// component where the kernel lacks openat2 (or `use_openat2` is false, for tests).
// kNotFound when a component is missing; kFailedPrecondition when one is a symlink or not a
// directory.
[[nodiscard]] absl::StatusOr<base::UniqueFd> OpenDirBeneath(int root_fd, absl::string_view rel,
                                                            bool use_openat2 = true);

// Opens `root` as a directory (O_DIRECTORY | O_CLOEXEC; `root` itself may be a symlink).
[[nodiscard]] absl::StatusOr<base::UniqueFd> OpenRoot(const std::string& root);

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<absl::string_view, absl::string_view> SplitParent(absl::string_view rel);

}  // namespace abox::workspace
