// Runs the host's git for workspace work (file lists, ignore checks, diffs, merges, the guest's
// repository): never a pager, a prompt, a hook, an fsmonitor, the system config, or a lock
// git could do without.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::workspace {

struct GitResult {
  int exit_code = 0;
  std::string out;  // empty when GitOptions::on_output took stdout
  std::string err;
};

struct GitOptions {
  absl::string_view input;  // on stdin
  // Output beyond this fails (kResourceExhausted); stderr is always held to it.
  size_t max_output = size_t{256} << 20;
  // Set: stdout goes here chunk by chunk instead of into GitResult::out (max_output does not
  // apply to it). An error stops git and is returned.
  std::function<absl::Status(absl::string_view)> on_output;
  // Also leave out the user's global config (~/.gitconfig, ~/.config/git/config): for
  // repositories abox builds itself, which nothing of the user's should shape.
  bool no_global_config = false;
  // "NAME=value" entries added to the environment (GIT_INDEX_FILE, GIT_AUTHOR_DATE...).
  std::vector<std::string> env;
};

// `git <args>` in `cwd`. A git that cannot run at all says to install it. The environment is
// the caller's without GIT_* (which could point git elsewhere), plus LC_ALL=C, no prompts, no
// optional locks, no system config, no replace refs, no lazy fetches of a partial clone, and
// `-c core.hooksPath=/dev/null -c core.fsmonitor=false` before `args`.
[[nodiscard]] absl::StatusOr<GitResult> RunGit(const std::string& cwd,
                                               const std::vector<std::string>& args,
                                               const GitOptions& options);

// The same with just an input and an output limit.
[[nodiscard]] absl::StatusOr<GitResult> RunGit(const std::string& cwd,
                                               const std::vector<std::string>& args,
                                               absl::string_view input = "",
                                               size_t max_output = size_t{256} << 20);

}  // namespace abox::workspace
