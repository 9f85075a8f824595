// `abox-guest ws manifest|unpack|pack`: the guest half of workspace sync. The host runs these as
// root through the ordinary exec channel (argv /run/abox/abox-guest ws ...), streaming a sync
// archive on stdin (unpack) or reading one / a manifest from stdout (pack, manifest).
//
// Trust: the host's archive is the truth for the paths it carries, but the tree it lands in is
// the agent's: a symlink, file or directory the agent left in the way of a synced path is
// replaced, never followed, so nothing is ever written outside ROOT. Everything unpacked belongs
// to --owner, with setuid/setgid/sticky bits dropped (root runs the unpack: a host file must not
// become a setuid-root binary in the VM).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/workspace/archive.h"

namespace abox::guest {

// Runs `ws SUBCOMMAND ...` (argv[0] is "ws") with the given stdio; returns the exit status:
// 0 success, 1 failure (one line on err_fd), 2 usage error.
int RunWorkspaceTool(int argc, char** argv, int in_fd, int out_fd, int err_fd);

struct UnpackOptions {
  std::optional<uid_t> uid;  // chown everything written (unset: leave as created)
  std::optional<gid_t> gid;
  workspace::ArchiveLimits limits;
  bool use_openat2 = true;  // false: tests cover the per-component fallback
};

struct UnpackStats {
  uint64_t files = 0;
  uint64_t dirs = 0;
  uint64_t symlinks = 0;
  uint64_t deleted = 0;
  uint64_t bytes = 0;
};

// Applies a sync archive to `root`: its deletions first, then its entries.
[[nodiscard]] absl::StatusOr<UnpackStats> UnpackArchive(const std::string& root,
                                                        const workspace::ArchiveSource& source,
                                                        const UnpackOptions& options);

// {"files":N,"dirs":N,"symlinks":N,"deleted":N,"bytes":N}
std::string UnpackStatsJson(const UnpackStats& stats);

// Bounds of `ws pack`'s path list on stdin.
inline constexpr size_t kMaxPackPaths = 1'000'000;
inline constexpr size_t kMaxPackListBytes = 64 << 20;

// NUL-separated relative paths (a final NUL optional), each valid, at most kMaxPackPaths.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> ParsePathList(absl::string_view list);

// Writes a sync archive of those `paths` that exist beneath `root` (files, dirs, symlinks as
// links; special files and missing paths skipped) to `sink`.
[[nodiscard]] absl::Status PackPaths(const std::string& root, const std::vector<std::string>& paths,
                                     const workspace::ArchiveSink& sink);

// The serialized manifest of `root`, using and updating the stat cache at `cache_path` when
// it is not empty (a cache that cannot be saved only costs time next scan).
[[nodiscard]] absl::StatusOr<std::string> ManifestOf(const std::string& root,
                                                     const std::string& cache_path);

}  // namespace abox::guest
