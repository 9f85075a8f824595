// abox secret set|ls|rm: secrets that never enter a VM (issue 15). The CLI reads a stored
// secret's value (from the environment, a file or stdin: never argv) and hands it to aboxd over
// its socket; aboxd keeps it in the keyring or a 0600 file.
#pragma once

#include "CLI/CLI.hpp"
#include "src/cli/command.h"

namespace abox::cli {

void AddSecretCommands(CLI::App& app, Action* action);

}  // namespace abox::cli
