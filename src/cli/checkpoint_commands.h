// abox checkpoint [ls|rm] | restore | fork: saving running sandboxes and going back to, or
// branching from, what was saved (clients of aboxd).
#pragma once

#include "CLI/CLI.hpp"
#include "src/cli/command.h"

namespace abox::cli {

void AddCheckpointCommands(CLI::App& app, Action* action);

}  // namespace abox::cli
