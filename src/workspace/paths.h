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

// True when `path` (already valid) is `.git` or lies under `.git/`.
[[nodiscard]] bool IsUnderGitDir(absl::string_view path);

// `path` printable in one line: control characters and non-UTF-8 bytes as \xNN escapes.
[[nodiscard]] std::string EscapePath(absl::string_view path);

}  // namespace abox::workspace
