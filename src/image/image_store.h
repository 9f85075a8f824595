// Reading installed images: list, verify, and open one for booting.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/base/host_layout.h"
#include "src/image/manifest.h"

namespace abox::image {

// One directory under images/: its manifest, or why it could not be read.
struct ListedImage {
  std::string name;
  std::filesystem::path dir;
  absl::StatusOr<Manifest> manifest;
};

// All images, sorted by name; a missing images dir is an empty list. A broken image is listed
// with its error rather than failing the whole listing.
[[nodiscard]] absl::StatusOr<std::vector<ListedImage>> ListImages(const base::HostLayout& paths);

// Recomputes the sha256 and size of every artifact of image `name` against its manifest.
// kDataLoss naming each mismatching artifact; kNotFound if there is no such image.
[[nodiscard]] absl::Status VerifyImage(const base::HostLayout& paths, const std::string& name);

// What the VMM needs to boot an image. The files are immutable; a rebuild replaces the
// directory (new inodes), so a sandbox that must keep its exact backing file should hard-link
// `rootfs` into its own directory (same file system as ABOX_HOME) and use that as the qcow2
// backing file.
struct ImageFiles {
  std::filesystem::path dir;
  std::filesystem::path rootfs;     // rootfs.ext4 (raw, read-only golden image)
  std::filesystem::path vmlinux;    // uncompressed ELF, PVH entry
  std::filesystem::path initramfs;  // newc cpio
  std::string kernel_cmdline;       // from the manifest; append host-specific options
  Manifest manifest;
};

// Opens image `name` for a boot, fast enough to run on every boot: the manifest must parse and
// name this image, its protocol_version must equal `host_protocol_version`, vmlinux and
// initramfs are hashed and compared (small), rootfs.ext4 is checked by size and mtime only
// (full hashing is VerifyImage's job). Errors say what to run: "abox image build", or
// "abox image build --name X --force".
[[nodiscard]] absl::StatusOr<ImageFiles> OpenImageForBoot(const base::HostLayout& paths,
                                                          const std::string& name,
                                                          uint32_t host_protocol_version);

// The command that (re)builds image `name`: "abox image build" for "default", else with
// --name; `force` appends --force.
[[nodiscard]] std::string BuildCommandFor(const std::string& name, bool force);

}  // namespace abox::image
