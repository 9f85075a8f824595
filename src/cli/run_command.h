// `abox run`: one command in a throwaway sandbox. By default through aboxd (started on demand),
// so the sandbox comes from the warm pool or the golden snapshot like any `abox create`; with
// --direct (or ABOX_RUN_DIRECT=1), abox boots the VM itself, without aboxd.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "src/cli/command.h"
#include "src/cli/exit_status.h"
#include "src/runtime/sandbox.h"
#include "src/workspace/workspace_state.h"

namespace abox::cli {

// The label every `abox run` sandbox carries in aboxd: the next `abox run` removes those a killed
// run left behind (stopped by their idle timeout, failed or paused).
inline constexpr char kRunLabel[] = "abox.run";
// How long aboxd keeps a run's sandbox once no command runs in it: only matters when `abox run`
// was killed before it could remove the sandbox.
inline constexpr int64_t kRunIdleTimeoutSeconds = 60;

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
  // Through aboxd only: boot instead of taking a pooled VM or cloning the golden snapshot, and
  // the sandbox's egress (absent: aboxd's global mode, like `abox create`).
  bool cold = false;
  std::string egress;
  std::vector<std::string> allow;
};

// Registers `run` on `app`; when parsed it sets `*action`. `tail` and `has_tail` are the words
// after `abox run ... --` (see AddExecCommands).
void AddRunCommand(CLI::App& app, Action* action, const std::vector<std::string>* tail,
                   const bool* has_tail);

// `abox run --direct`: boots a fresh microVM itself (no aboxd), runs the command with the
// terminal's stdin/stdout/stderr, destroys the VM and returns the exit code to use.
int RunInFreshVm(const RunOptions& options);

// `abox run` through aboxd: creates a sandbox labelled kRunLabel, relays the command like
// `abox exec`, removes the sandbox, and returns the exit code to use.
int RunThroughDaemon(const RunOptions& options);

}  // namespace abox::cli
