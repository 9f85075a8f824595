#include "src/guest/root_grow.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "src/base/unique_fd.h"

namespace abox::guest {
namespace {

// <linux/ext4.h> is not a uapi header on every kernel; the value is fixed ABI.
constexpr unsigned long kExt4IocResizeFs = _IOW('f', 16, uint64_t);  // NOLINT(runtime/int)

absl::Status Errno(const std::string& what) { return absl::ErrnoToStatus(errno, what); }

}  // namespace

uint64_t GrowTarget(uint64_t device_bytes, uint64_t block_size, uint64_t current_blocks) {
  if (block_size == 0) {
    return 0;
  }
  uint64_t blocks = device_bytes / block_size;
  return blocks > current_blocks ? blocks : 0;
}

absl::StatusOr<std::string> GrowRootFilesystem(const std::string& device,
                                               const std::string& mount_point) {
  base::UniqueFd dev(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (!dev.valid()) {
    return Errno(absl::StrCat("open(", device, ")"));
  }
  uint64_t device_bytes = 0;
  if (::ioctl(dev.get(), BLKGETSIZE64, &device_bytes) != 0) {
    return Errno(absl::StrCat("ioctl(", device, ", BLKGETSIZE64)"));
  }
  base::UniqueFd root(::open(mount_point.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) {
    return Errno(absl::StrCat("open(", mount_point, ")"));
  }
  // f_blocks leaves out ext4's overhead, so it only says whether the disk may have room; the
  // kernel compares against the superblock's count and does nothing when they are equal.
  struct statvfs st {};
  if (::fstatvfs(root.get(), &st) != 0) {
    return Errno(absl::StrCat("statvfs(", mount_point, ")"));
  }
  const uint64_t before_mib = (st.f_blocks * st.f_frsize) >> 20;
  uint64_t target = GrowTarget(device_bytes, st.f_frsize, st.f_blocks);
  if (target == 0) {
    return absl::StrCat("root file system already fills its disk (", device_bytes >> 20, " MiB)");
  }
  if (::ioctl(root.get(), kExt4IocResizeFs, &target) != 0) {
    return Errno(absl::StrCat("ioctl(", mount_point, ", EXT4_IOC_RESIZE_FS, ", target, ")"));
  }
  if (::fstatvfs(root.get(), &st) != 0) {
    return Errno(absl::StrCat("statvfs(", mount_point, ")"));
  }
  return absl::StrCat("root file system grown from ", before_mib, " to ",
                      (st.f_blocks * st.f_frsize) >> 20, " MiB (disk ", device_bytes >> 20,
                      " MiB)");
}

}  // namespace abox::guest
