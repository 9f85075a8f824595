// Grows the root file system to its disk. Images are built with a file system just large enough
// for their content (rootfs.ext4, sparse); each sandbox's disk is a qcow2 overlay whose size the
// host chooses (`abox create --disk`, 16 GiB by default). At boot, before anything runs, the
// guest grows ext4 online to the disk's size with EXT4_IOC_RESIZE_FS (the kernel zeroes the new
// groups' inode tables with write-zeroes requests, which qcow2 records without writing data).
// The host's limit is the overlay's size: a guest that skips or undoes this only has less room.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace abox::guest {

// The file system's new size in blocks for a disk of `device_bytes`: the whole blocks that fit.
// 0 when the disk holds no more blocks than `current_blocks` (nothing to do).
[[nodiscard]] uint64_t GrowTarget(uint64_t device_bytes, uint64_t block_size,
                                  uint64_t current_blocks);

// Grows the ext4 mounted at `mount_point` (on block device `device`) to the device's size.
// Returns a line for the console ("root file system grown from X to Y MiB" or "already fills
// its disk").
[[nodiscard]] absl::StatusOr<std::string> GrowRootFilesystem(const std::string& device,
                                                             const std::string& mount_point);

}  // namespace abox::guest
