// Runs the host's git for workspace work (file lists, ignore checks, diffs, merges): never a
// pager, a prompt, the user's global or system config that could run programs, or a lock.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::workspace {

struct GitResult {
  int exit_code = 0;
  std::string out;
  std::string err;
};

// `git <args>` in `cwd` with `input` on stdin. Output beyond `max_output` fails
// (kResourceExhausted). A git that cannot run at all says to install it.
[[nodiscard]] absl::StatusOr<GitResult> RunGit(const std::string& cwd,
                                               const std::vector<std::string>& args,
                                               absl::string_view input = "",
                                               size_t max_output = size_t{256} << 20);

}  // namespace abox::workspace
