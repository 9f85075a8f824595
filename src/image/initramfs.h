// The initramfs: an uncompressed newc cpio holding /init (the abox-guest binary) and the kernel
// modules stage 1 loads before it mounts the root disk. Written with libarchive.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace abox::image {

// One member of a cpio archive. Owner is always root:root, mtime 0 (reproducible output).
struct CpioEntry {
  enum class Type { kDirectory, kFile, kCharDevice };
  std::string path;  // relative, no leading '/', e.g. "abox/modules/01-virtio.ko"
  Type type = Type::kFile;
  uint32_t mode = 0644;  // permission bits only
  std::string data;      // file contents (kFile)
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;  // kCharDevice
};

// Writes `entries` in order as an uncompressed newc cpio to `out` (created/truncated).
[[nodiscard]] absl::Status WriteCpio(const std::filesystem::path& out,
                                     const std::vector<CpioEntry>& entries);

// A module already ordered for loading.
struct InitramfsModule {
  std::string name;  // e.g. "virtio_blk"
  std::string data;  // uncompressed .ko
};

// Members of the abox initramfs: directories dev proc sys newroot run abox abox/modules,
// dev/console (5,1: the kernel opens it as PID 1's stdio), init (0755, `agent_binary`),
// abox/initramfs (marker that tells abox-guest it is stage 1), and abox/modules/NN-name.ko with
// NN the 1-based load order, zero-padded to two digits.
[[nodiscard]] std::vector<CpioEntry> InitramfsEntries(std::string agent_binary,
                                                      const std::vector<InitramfsModule>& modules);

}  // namespace abox::image
