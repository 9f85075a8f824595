// `abox logs` (a sandbox's exec history and console log) and `abox events` (the daemon's
// lifecycle events as they happen).
#pragma once

#include "CLI/CLI.hpp"
#include "src/cli/command.h"

namespace abox::cli {

// Registers the commands on `app`; the one parsed sets `*action`.
void AddLogCommands(CLI::App& app, Action* action);

}  // namespace abox::cli
