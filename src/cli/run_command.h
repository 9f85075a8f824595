#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/cli/exit_status.h"
#include "src/runtime/sandbox.h"
#include "src/workspace/workspace_state.h"

namespace abox::cli {

struct RunOptions {
  runtime::SandboxConfig sandbox;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string workdir;
  bool root = false;
  bool forward_stdin = true;
  // Allocate a PTY in the guest (stdout and stderr merged); raw mode and window size follow
  // our terminal when stdin is one.
  bool tty = false;
  double timeout_seconds = 0;
  // -w DIR: a copy of this host directory goes to `workspace.guest_path` before the command
  // runs (and the command starts there unless --workdir says otherwise). The copy dies with
  // the VM: to bring changes back, use `abox create -w` and `abox apply`.
  std::optional<workspace::Binding> workspace;
};

// `abox run`: boots a fresh microVM, runs the command with the terminal's stdin/stdout/stderr,
// destroys the VM and returns the exit code to use.
int RunInFreshVm(const RunOptions& options);

}  // namespace abox::cli
