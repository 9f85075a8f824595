// The build cache's record of one finished rootfs build (rootfs.ext4, vmlinux, modules).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/base/host_layout.h"
#include "src/image/manifest.h"

namespace abox::image {

// A finished cache entry: <cache>/rootfs/<key>/{rootfs.ext4, vmlinux, modules/NN-name.ko,
// entry.json}. Files are read-only and never change once the directory exists.
struct RootfsEntry {
  std::filesystem::path dir;
  std::string key;
  std::string kernel_version;
  std::string kernel_package;
  std::vector<std::string> packages;  // "name=version", sorted
  std::vector<std::string> modules;   // initramfs load order
  ArtifactInfo rootfs;                // sha256 + size (mtime unused)
  ArtifactInfo vmlinux;

  [[nodiscard]] std::filesystem::path ModulePath(size_t i) const;
};

// Loads the entry for `key`; kNotFound if there is none (or it is damaged: then it is removed).
[[nodiscard]] absl::StatusOr<RootfsEntry> LoadRootfsEntry(const base::HostLayout& paths,
                                                          const std::string& key);

// <cache>/rootfs/<key>
[[nodiscard]] std::filesystem::path RootfsEntryDir(const base::HostLayout& paths,
                                                   const std::string& key);

// Writes <e.dir>/entry.json (read-only), recording the entry and the inputs it was built from.
[[nodiscard]] absl::Status WriteRootfsEntryJson(const RootfsEntry& e, const std::string& suite,
                                                const std::string& mirror, const std::string& arch);

}  // namespace abox::image
