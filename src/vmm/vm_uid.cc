#include "src/vmm/vm_uid.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/vmm/jail.h"

namespace abox::vmm {

absl::StatusOr<VmUidLease> LeaseVmUid(const std::string& lock_dir, std::string_view seed) {
  std::error_code ec;
  std::filesystem::create_directories(lock_dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("creating ", lock_dir, ": ", ec.message()));
  }
  struct stat st {};
  if (::lstat(lock_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat(lock_dir, " is not a directory of this user; remove it"));
  }
  ::chmod(lock_dir.c_str(), 0700);
  uint32_t start = 2166136261U;  // FNV-1a of the seed: the same VM id tends to the same uid
  for (char c : seed) {
    start = (start ^ static_cast<unsigned char>(c)) * 16777619U;
  }
  for (uint32_t i = 0; i < kVmUidCount; ++i) {
    uid_t uid = kVmUidBase + (start + i) % kVmUidCount;
    std::string path = absl::StrCat(lock_dir, "/", uid);
    base::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) {
      return base::ErrnoError(absl::StrCat("open(", path, ")"));
    }
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      return VmUidLease{.uid = uid, .lock = std::move(fd)};
    }
    if (errno != EWOULDBLOCK) {
      return base::ErrnoError(absl::StrCat("flock(", path, ")"));
    }
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("all ", kVmUidCount, " per-VM uids are in use (", lock_dir, ")"));
}

}  // namespace abox::vmm
