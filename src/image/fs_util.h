// File-system helpers for building images atomically: temp dirs, locks, hard-link-or-sparse-copy,
// directory swaps. Deletes go through base::RemoveUnder (src/base/fenced_remove.h).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"

namespace abox::image {

// mkdtemp(parent/prefixXXXXXX), then chmod `mode`. Creates `parent` if needed.
[[nodiscard]] absl::StatusOr<std::filesystem::path> MakeTempDir(const std::filesystem::path& parent,
                                                                const std::string& prefix,
                                                                mode_t mode = 0755);

// Hard-links `src` to `dst`; across file systems (or where links are refused) copies instead,
// keeping holes (SEEK_DATA/SEEK_HOLE) so a sparse rootfs stays sparse. `dst` must not exist.
// Sets *linked to whether a hard link was made.
[[nodiscard]] absl::Status LinkOrCopy(const std::filesystem::path& src,
                                      const std::filesystem::path& dst, bool* linked);

// fsync() of a file or directory.
[[nodiscard]] absl::Status FsyncPath(const std::filesystem::path& path);

// Moves directory `from` to `to` atomically. If `to` exists, the two are exchanged
// (renameat2 RENAME_EXCHANGE) and the old contents, now at `from`, are removed with
// base::RemoveUnder fenced to `root` (which holds both).
[[nodiscard]] absl::Status ReplaceDir(const std::filesystem::path& root,
                                      const std::filesystem::path& from,
                                      const std::filesystem::path& to);

// An exclusive flock() on a lock file, released on destruction.
class FileLock final {
 public:
  // Fails with kUnavailable if another process holds it; `what` names the holder in the error.
  [[nodiscard]] static absl::StatusOr<FileLock> TryAcquire(const std::filesystem::path& path,
                                                           const std::string& what);
  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&&) = default;

  // The locked descriptor. A child that inherits it (SpawnOptions::keep_fds) keeps the lock
  // held until it exits too, even if this process dies first.
  [[nodiscard]] int fd() const { return fd_.get(); }

 private:
  explicit FileLock(base::UniqueFd fd) : fd_(std::move(fd)) {}
  base::UniqueFd fd_;
};

// Stat summary of a file for quick change detection.
struct FileStamp {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};
[[nodiscard]] absl::StatusOr<FileStamp> StatFile(const std::filesystem::path& path);

}  // namespace abox::image
