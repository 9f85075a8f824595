#include "src/workspace/run_copies.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::workspace {

absl::StatusOr<base::UniqueFd> LockRunCopy(const std::string& lock_path, bool wait) {
  for (;;) {
    base::UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) {
      return base::ErrnoError(absl::StrCat("open(", lock_path, ")"));
    }
    int r;
    do {
      r = ::flock(fd.get(), LOCK_EX | (wait ? 0 : LOCK_NB));
    } while (r != 0 && errno == EINTR);
    if (r != 0) {
      if (errno == EWOULDBLOCK) {
        return absl::UnavailableError(absl::StrCat(lock_path, " is held by a running abox run"));
      }
      return base::ErrnoError(absl::StrCat("flock(", lock_path, ")"));
    }
    struct stat held = {};
    struct stat at_path = {};
    if (::fstat(fd.get(), &held) != 0) {
      return base::ErrnoError(absl::StrCat("fstat(", lock_path, ")"));
    }
    if (::lstat(lock_path.c_str(), &at_path) == 0 && at_path.st_dev == held.st_dev &&
        at_path.st_ino == held.st_ino) {
      return fd;
    }
  }
}

absl::StatusOr<int> CollectRunLeftovers(const std::filesystem::path& home) {
  std::filesystem::path tmp = home / "tmp";
  std::set<std::string> ids;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(tmp, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::string filename = it->path().filename().string();
    absl::string_view name = filename;
    if (absl::ConsumePrefix(&name, kRunCopyPrefix)) {
      absl::ConsumeSuffix(&name, kRunCopyLockSuffix);
      if (!name.empty()) {
        ids.emplace(name);
      }
    }
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return absl::InternalError(absl::StrCat("cannot list ", tmp.string(), ": ", ec.message()));
  }
  int removed = 0;
  absl::Status first_error;  // one bad entry does not keep the others
  for (const std::string& id : ids) {
    std::string dir = (tmp / absl::StrCat(kRunCopyPrefix, id)).string();
    std::string lock_path = absl::StrCat(dir, kRunCopyLockSuffix);
    absl::StatusOr<base::UniqueFd> lock = LockRunCopy(lock_path, /*wait=*/false);
    if (absl::IsUnavailable(lock.status())) {
      continue;  // its run is alive
    }
    bool had_copy = std::filesystem::exists(std::filesystem::symlink_status(dir, ec));
    absl::Status s = lock.status();
    if (s.ok()) {
      s = base::RemoveUnder(home, dir);
    }
    if (s.ok()) {
      s = base::RemoveFileUnder(home, lock_path);
    }
    if (!s.ok()) {
      first_error.Update(s);
      continue;
    }
    removed += had_copy ? 1 : 0;
  }
  ABOX_RETURN_IF_ERROR(first_error);
  return removed;
}

}  // namespace abox::workspace
