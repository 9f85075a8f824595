// `abox daemon start|stop|status|unit`: managing aboxd, the per-user daemon that the sandbox
// commands talk to (and start on demand).
#pragma once

#include "CLI/CLI.hpp"
#include "src/cli/command.h"

namespace abox::cli {

// Registers `daemon` and its subcommands on `app`; the one parsed sets `*action`.
void AddDaemonCommands(CLI::App& app, Action* action);

}  // namespace abox::cli
