#pragma once

#include <map>
#include <string>
#include <vector>

#include "src/cli/exit_status.h"
#include "src/runtime/sandbox.h"

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
};

// `abox run`: boots a fresh microVM, runs the command with the terminal's stdin/stdout/stderr,
// destroys the VM and returns the exit code to use.
int RunInFreshVm(const RunOptions& options);

}  // namespace abox::cli
