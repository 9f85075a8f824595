// Files that make code run somewhere else later: a CI workflow runs on the next push, a
// Makefile or package.json script on the next build, an editor task when the folder opens, a
// git hook on the next commit, .envrc when the shell enters the directory. An agent that writes
// one can run code outside its sandbox, so apply refuses such changes unless the person asks
// for them by name (--allow-exec-files) after reading them.
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace abox::workspace {

// Why `rel` (a valid relative path) is execution-sensitive, or nullopt when it is not.
[[nodiscard]] std::optional<std::string> ExecSensitiveReason(absl::string_view rel);

// Why a symlink at `rel` with `target` needs the same explicit flag: it points outside the
// workspace (an absolute target, or one whose ".." climbs above the root), so the person's
// tools that follow it would read or write elsewhere. nullopt for a link that stays inside.
[[nodiscard]] std::optional<std::string> SymlinkEscapeReason(absl::string_view rel,
                                                             absl::string_view target);

}  // namespace abox::workspace
