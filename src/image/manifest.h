// manifest.json: what an image is made of, and the hashes that prove it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::image {

// File names inside images/<name>/.
inline constexpr char kRootfsFile[] = "rootfs.ext4";
inline constexpr char kVmlinuxFile[] = "vmlinux";
inline constexpr char kInitramfsFile[] = "initramfs.cpio";
inline constexpr char kManifestFile[] = "manifest.json";

// Version of the manifest layout; ParseManifest rejects others.
inline constexpr int kManifestFormat = 1;

// One artifact file of an image.
struct ArtifactInfo {
  std::string sha256;    // lower-case hex
  uint64_t size = 0;     // bytes (apparent size; rootfs.ext4 is sparse)
  int64_t mtime_ns = 0;  // modification time when the image was written (cheap boot-time check)

  bool operator==(const ArtifactInfo&) const = default;
};

// A coding agent installed in the rootfs (`abox image build --agent`).
struct ManifestAgent {
  std::string name;       // "claude"
  std::string package;    // npm package, "@anthropic-ai/claude-code"
  std::string version;    // exact, "2.1.332"
  std::string integrity;  // npm dist.integrity of package@version
  std::string command;    // in-image path on PATH, "/usr/local/bin/claude"
  std::string binary;     // in-image executable it links to, under /opt/abox/agents

  bool operator==(const ManifestAgent&) const = default;
};

struct Manifest {
  int format = kManifestFormat;
  std::string name;
  std::string created_at;  // RFC 3339, UTC
  // Keyed by file name; exactly kRootfsFile, kVmlinuxFile and kInitramfsFile.
  std::map<std::string, ArtifactInfo> artifacts;
  std::string kernel_version;  // e.g. "6.1.0-28-cloud-amd64"
  std::string kernel_package;  // Debian package version of the kernel, e.g. "6.1.119-1"
  // Kernel command line the image expects (the VMM adds host-specific parts, e.g.
  // tsc_early_khz=).
  std::string kernel_cmdline;
  std::string agent_version;
  std::string agent_sha256;
  uint32_t protocol_version = 0;
  std::string suite;
  std::string mirror;
  std::string arch;  // Debian architecture, e.g. "amd64"
  // The package preset it was built from (image_presets.h). Optional in the JSON: empty in
  // manifests from before presets, which were "minimal".
  std::string preset;
  std::vector<std::string> extra_packages;     // requested on top of the defaults
  std::vector<std::string> packages;           // installed, "name=version", sorted
  std::vector<std::string> initramfs_modules;  // load order, e.g. "virtio_blk"
  std::string rootfs_key;                      // build-cache key of rootfs + kernel
  std::string inputs;                          // sha256 over every build input
  std::string builder_version;
  // Coding agents in the rootfs. Optional in the JSON: manifests from before agents had none.
  std::vector<ManifestAgent> coding_agents;

  bool operator==(const Manifest&) const = default;
};

// Serializes to pretty-printed JSON with stable key order.
[[nodiscard]] std::string ManifestToJson(const Manifest& manifest);

// Parses and validates: every field (but the optional coding_agents) present with the right type,
// format == kManifestFormat, hashes well-formed, exactly the three known artifacts.
// kInvalidArgument/kDataLoss otherwise.
[[nodiscard]] absl::StatusOr<Manifest> ParseManifest(absl::string_view json);

// Checks that a parsed manifest belongs to the image directory `expected_name`.
[[nodiscard]] absl::Status CheckManifestName(const Manifest& manifest,
                                             const std::string& expected_name);

}  // namespace abox::image
