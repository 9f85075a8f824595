// `abox exec` and `abox shell`: run a command in a sandbox that aboxd keeps, with the local
// terminal's stdin, stdout, stderr, signals and window size.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "src/cli/command.h"

namespace abox::cli {

// Registers `exec` and `shell` on `app`; the one parsed sets `*action`. `tail` holds the
// arguments after `abox exec ... --`, taken out before CLI11 parsed the rest (`has_tail` says
// whether there was a `--`); without one, everything after the sandbox id is the command.
void AddExecCommands(CLI::App& app, Action* action, const std::vector<std::string>* tail,
                     const bool* has_tail);

}  // namespace abox::cli
