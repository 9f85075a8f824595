// `abox exec` and `abox shell`: run a command in a sandbox that aboxd keeps, with the local
// terminal's stdin, stdout, stderr, signals and window size.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "src/api/exec.h"
#include "src/cli/command.h"
#include "src/client/api_client.h"

namespace abox::cli {

// Registers `exec` and `shell` on `app`; the one parsed sets `*action`. `tail` holds the
// arguments after `abox exec ... --`, taken out before CLI11 parsed the rest (`has_tail` says
// whether there was a `--`); without one, everything after the sandbox id is the command.
void AddExecCommands(CLI::App& app, Action* action, const std::vector<std::string>* tail,
                     const bool* has_tail);

// Starts `body` in `sandbox` through `api` and relays it until it ends: output to our stdout and
// stderr, our stdin (when body.stdin_open), signals (the first of a kind to the command, a second
// leaves) and, with a PTY, raw mode and window size. Returns the exit status to use (the
// command's, or kExitAboxFailure with the error printed). When the guest's OOM killer struck
// during the command, says so with the sandbox's memory and how to give more (`memory_command`,
// e.g. "abox run": "... e.g. abox run --memory 1024"). The caller blocked the handled signals
// (BlockHandledSignals) before starting any thread.
int RelayExec(client::ApiClient& api, const std::string& sandbox, const api::ExecCreate& body,
              const std::string& memory_command = "abox create");

}  // namespace abox::cli
