// Workspace paths: the one check every path from a file set, a manifest, an archive or an API
// request passes before abox touches a file by it.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace abox::workspace {

// Longest relative path and component abox accepts (Linux's PATH_MAX / NAME_MAX).
inline constexpr size_t kMaxPathBytes = 4096;
inline constexpr size_t kMaxComponentBytes = 255;

// OK for a relative path inside a workspace root: not empty, '/'-separated, no leading or
// trailing '/', no empty, "." or ".." component, no NUL or other control character (a newline
// in a name would break line-based tools and listings), within the length limits.
// kInvalidArgument naming the path (escaped) and the rule otherwise.
[[nodiscard]] absl::Status ValidateRelativePath(absl::string_view path);

// True when `path` (already valid) is `.git` or lies under `.git/` (the root's git directory).
[[nodiscard]] bool IsUnderGitDir(absl::string_view path);

// True when any component of `path` is `.git`, compared case-insensitively (`.GIT` is the same
// directory on a case-insensitive file system): the root's git directory, a nested repository's
// (`tools/.git/config`, whose core.fsmonitor or hooks run as soon as a git-aware prompt or
// editor looks at `tools/`), or a gitlink file (`sub/.git` holding `gitdir: ...`). abox never
// writes such a path on the host.
[[nodiscard]] bool HasGitComponent(absl::string_view path);

// `path` printable in one line: control characters and non-UTF-8 bytes as \xNN escapes.
[[nodiscard]] std::string EscapePath(absl::string_view path);

}  // namespace abox::workspace
