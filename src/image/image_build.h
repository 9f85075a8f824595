// `abox image build`: assembles images/<name>/{rootfs.ext4, vmlinux, initramfs.cpio,
// manifest.json} from the cached rootfs build plus the abox-guest binary.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/base/host_layout.h"
#include "src/base/version.h"
#include "src/image/manifest.h"
#include "src/image/rootfs_build.h"

namespace abox::image {

// Kernel command line the image is made for; recorded in the manifest. The VMM appends
// host-specific parts (tsc_early_khz=<HostTscKhz()> under TCG).
inline constexpr char kKernelCmdline[] =
    "console=ttyS0 mitigations=off cryptomgr.notests nokaslr edd=off audit=0 no_timer_check "
    "random.trust_cpu=on panic=-1";

struct BuildOptions {
  std::string name = "default";
  std::string preset = "developer";         // see image_presets.h
  std::vector<std::string> extra_packages;  // on top of kDefaultPackages and the preset's
  std::string suite = kDefaultSuite;
  std::string mirror = kDefaultMirror;
  std::filesystem::path agent_binary;  // static abox-guest; becomes /init
  std::string agent_version = kVersion;
  uint32_t protocol_version = 0;  // required: pass abox::proto::kProtocolVersion
  bool force = false;             // rebuild everything, ignoring the cache
  // Coding agents to install, as `--agent` specs ("claude", "codex@0.171.0"); see coding_agent.h.
  std::vector<std::string> coding_agents;
  NpmRunner npm;  // runs npm for coding_agents; empty means the host's (SystemNpmRunner)
};

// Build progress: stage i of total (5), what it is doing, time since the build started.
struct Progress {
  int stage = 0;
  int total = 0;
  std::string message;
  std::chrono::milliseconds elapsed{0};
};
using ProgressFn = std::function<void(const Progress&)>;

struct BuildResult {
  Manifest manifest;
  std::filesystem::path dir;   // images/<name>
  bool up_to_date = false;     // nothing was rebuilt ("image X is up to date")
  bool rootfs_cached = false;  // the rootfs/kernel came from the build cache
};

// Builds (or confirms) image `options.name`. Stages: [1/5] resolve inputs (coding agents to
// exact versions with `npm view`: needs the registry even when the image is current), [2/5]
// rootfs (npm install of the agents, mmdebstrap + mke2fs, cached), [3/5] kernel (vmlinux + modules,
// cached), [4/5] initramfs, [5/5] manifest + install. Same inputs as the installed image: no-op.
// New agent binary: only the initramfs is rebuilt. The image dir is replaced atomically; an
// interrupted build leaves only temp dirs, which the next build deletes. One build at a time per
// ABOX_HOME/cache (kUnavailable otherwise). Errors name the log file and what to do next.
[[nodiscard]] absl::StatusOr<BuildResult> BuildImage(const base::HostLayout& paths,
                                                     const BuildOptions& options,
                                                     const ProgressFn& progress);

// Checks that `elf` is an x86-64 executable without a PT_INTERP (static), as /init must be.
[[nodiscard]] absl::Status CheckStaticAgentBinary(absl::string_view elf);

// sha256 identifying everything an image is built from.
[[nodiscard]] std::string ImageInputsHash(const std::string& rootfs_key,
                                          const std::string& agent_sha256,
                                          const std::string& agent_version,
                                          uint32_t protocol_version);

}  // namespace abox::image
