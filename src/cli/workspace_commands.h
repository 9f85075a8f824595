// abox sync | diff | apply | pull | undo | artifacts: the workspace commands (clients of aboxd).
#pragma once

#include "CLI/CLI.hpp"
#include "src/cli/command.h"

namespace abox::cli {

void AddWorkspaceCommands(CLI::App& app, Action* action);

}  // namespace abox::cli
