// `abox create`, `abox ls`, `abox inspect`, `abox rm`, `abox stop`: thin clients of the
// /v1/sandboxes API.
#pragma once

#include "CLI/CLI.hpp"
#include "src/cli/command.h"

namespace abox::cli {

// Registers the commands on `app`; the one parsed sets `*action`.
void AddSandboxCommands(CLI::App& app, Action* action);

}  // namespace abox::cli
