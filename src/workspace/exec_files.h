// Files that make code run somewhere else later: a CI workflow runs on the next push, a
// Makefile or package.json script on the next build, an editor task when the folder opens, a
// git hook on the next commit, .envrc when the shell enters the directory. An agent that writes
// one can run code outside its sandbox, so apply refuses such changes unless the person asks
// for them by name (--allow-exec-files) after reading them.
//
// Symlinks that lead outside the workspace need the same flag: the person's tools that follow
// one read or write elsewhere. Where a link leads is judged in the whole resulting tree, every
// link on the way expanded (ResolveSymlink), never from the link's own text alone.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::workspace {

// Why `rel` (a valid relative path) is execution-sensitive, or nullopt when it is not.
[[nodiscard]] std::optional<std::string> ExecSensitiveReason(absl::string_view rel);

// The symlinks of a tree: the target of the symlink at `path` (a relative path, components
// joined by '/'), or nullptr when `path` is no symlink (a file, a directory, nothing).
using SymlinkLookup = absl::FunctionRef<const std::string*(absl::string_view path)>;

// More expansions than this on one path is a loop or a chain no kernel follows (Linux's
// MAXSYMLINKS): where it leads cannot be told, so it counts as leaving the workspace.
inline constexpr int kMaxSymlinkHops = 40;

struct SymlinkWalk {
  // Why following the link leaves the workspace (or cannot be resolved); nullopt: it stays.
  std::optional<std::string> escape;
  // The other symlinks expanded on the way, as "path -> target", in order.
  std::vector<std::string> through;
};

// Follows the symlink at `rel` (a valid relative path) with `target` the way a tool that opens
// it would, in the tree `links` describes: every symlink met on the way is expanded (chains,
// relative targets, a `..` after a link is taken from where the link led), an absolute target
// and a `..` above the root leave the workspace, and more than kMaxSymlinkHops expansions count
// as leaving it. A component that is no symlink counts as a directory even when it is a file or
// missing, so a link through a directory that does not exist yet is judged as if it were made
// later (never less strict than the kernel). Each component looked at costs one of
// `*steps_left`; kResourceExhausted when they run out (a hostile tree of huge chains).
[[nodiscard]] absl::StatusOr<SymlinkWalk> ResolveSymlink(absl::string_view rel,
                                                         absl::string_view target,
                                                         SymlinkLookup links, size_t* steps_left);

// ResolveSymlink in a tree without other symlinks: why the link at `rel` with `target` points
// outside the workspace by its own text (an absolute target, or one whose ".." climbs above the
// root), nullopt when it stays inside.
[[nodiscard]] std::optional<std::string> SymlinkEscapeReason(absl::string_view rel,
                                                             absl::string_view target);

}  // namespace abox::workspace
