// The expensive, cached half of an image: Debian rootfs (mmdebstrap -> rootfs.ext4), the
// uncompressed kernel and the initramfs modules, stored in the build cache under a key derived
// from every input.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/base/host_layout.h"
#include "src/image/agent_fetch.h"
#include "src/image/coding_agent.h"
#include "src/image/manifest.h"
#include "src/image/rootfs_entry.h"

namespace abox::image {

// Bump when the build recipe changes in a way the scripts' text does not show.
inline constexpr char kBuilderVersion[] = "abox-image-1";
inline constexpr char kDefaultSuite[] = "bookworm";
inline constexpr char kDefaultMirror[] = "http://deb.debian.org/debian";
// What a coding agent needs; kmod and passwd are also needed by the build itself.
// nftables: abox-guest loads the egress redirect with `nft` (kmod's modprobe loads its modules).
inline constexpr const char* kDefaultPackages[] = {
    "bash", "ca-certificates", "coreutils", "curl",   "findutils", "git", "iproute2", "kmod",
    "less", "nftables",        "passwd",    "procps", "python3",   "tar", "xz-utils",
};

// Inputs of the cached rootfs build.
struct RootfsInputs {
  std::string suite = kDefaultSuite;
  std::string mirror = kDefaultMirror;
  std::string arch = "amd64";         // Debian architecture
  std::vector<std::string> packages;  // full set, see PackageSet()
  // Coding agents installed under /opt/abox/agents (resolved to exact versions beforehand).
  std::vector<ResolvedAgent> agents;
};

// Defaults plus `extra`, sorted and deduplicated.
[[nodiscard]] std::vector<std::string> PackageSet(const std::vector<std::string>& extra);

// Rejects values that could not be Debian suites/mirrors/package names (they end up on the
// mmdebstrap command line): kInvalidArgument with what is wrong.
[[nodiscard]] absl::Status ValidateRootfsInputs(const RootfsInputs& inputs);

// sha256 over the inputs, kBuilderVersion, the build scripts and the initramfs module list.
// Package order and duplicates do not matter. Agents count by name, package, version and
// integrity (a new version rebuilds, the same one hits the cache); without agents the key is
// what it was before agents existed.
[[nodiscard]] std::string RootfsCacheKey(const RootfsInputs& inputs);

// Debian architecture of this host ("amd64"); kUnimplemented elsewhere for now.
[[nodiscard]] absl::StatusOr<std::string> HostDebianArch();

// Reports the start of build stage 2 (rootfs) or 3 (kernel).
using StageFn = std::function<void(int stage, const std::string& message)>;

// Builds the entry for `inputs` (replacing an existing one): agents, if any, are fetched with
// `npm` (StageAgents; npm cache in <cache>/npm), then one mmdebstrap run (mode unshare, so it
// works rootless; see kCustomizeHook) copies them in, fetches the kernel and writes
// rootfs.ext4, then kernel extraction and module selection in-process. npm's and mmdebstrap's
// output goes to <cache>/logs/build-<key prefix>.log, named in every error. Caller holds the
// cache lock.
[[nodiscard]] absl::StatusOr<RootfsEntry> BuildRootfsEntry(const base::HostLayout& paths,
                                                           const RootfsInputs& inputs,
                                                           const StageFn& stage,
                                                           const NpmRunner& npm);

// Deletes temp dirs of builds that were killed (caller holds the cache lock, so no build is
// running). Failures are logged, not returned: a stale dir must not block new builds.
void CleanStaleRootfsBuilds(const base::HostLayout& paths);

// Turns a failed mmdebstrap log into advice, as a status whose code classifies the failure:
// kUnavailable (mirror unreachable), kNotFound (unknown package), else kInternal with the last
// apt/hook error line (empty message if none).
[[nodiscard]] absl::Status MmdebstrapFailureHint(absl::string_view log, const std::string& mirror);

}  // namespace abox::image
