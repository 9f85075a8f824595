// Blocking and non-blocking I/O helpers that retry EINTR and name the failing call.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"

namespace abox::base {

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

// pipe2(O_CLOEXEC | extra_flags).
[[nodiscard]] absl::StatusOr<Pipe> MakePipe(int extra_flags = 0);

// Writes all of `data`, retrying EINTR and short writes (poll()s when the fd is non-blocking).
[[nodiscard]] absl::Status WriteAll(int fd, std::string_view data);

// One read(): returns the number of bytes (0 = EOF), retrying EINTR. EAGAIN is returned as an
// error with code kUnavailable.
[[nodiscard]] absl::StatusOr<size_t> ReadSome(int fd, char* buf, size_t len);

// Reads until EOF, failing with kResourceExhausted beyond `limit` bytes.
[[nodiscard]] absl::StatusOr<std::string> ReadAllFd(int fd, size_t limit);

// Reads a whole file (bounded by `limit`).
[[nodiscard]] absl::StatusOr<std::string> ReadFile(const std::string& path,
                                                   size_t limit = 64 << 20);

// Writes a file atomically: temp file in the same directory, fsync, rename, fsync directory.
[[nodiscard]] absl::Status WriteFileAtomic(const std::string& path, std::string_view data,
                                           int mode = 0644);

// Copies what `in` holds (a regular file or memfd, from offset 0) into `out` at the same
// offsets, skipping holes, and sizes `out` like `in`. `what` names `in` in errors.
[[nodiscard]] absl::Status CopyDataSparse(int in, int out, const std::string& what);

// Copies the regular file `from` to `to`, which must not exist, keeping holes (SEEK_DATA /
// SEEK_HOLE); the copy gets `mode` (not fsynced: SyncFile when it must be durable). On a
// failure `to` may be left partial.
[[nodiscard]] absl::Status CopyFileSparse(const std::string& from, const std::string& to,
                                          unsigned mode);
// fsync(2) of the file at `path`.
[[nodiscard]] absl::Status SyncFile(const std::string& path);

[[nodiscard]] absl::Status SetNonBlocking(int fd, bool non_blocking = true);

}  // namespace abox::base
