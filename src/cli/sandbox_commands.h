// `abox create`, `abox ls`, `abox inspect`, `abox rm`, `abox stop`: thin clients of the
// /v1/sandboxes API.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "src/api/sandbox.h"
#include "src/cli/command.h"

namespace abox::cli {

// A create's workspace from `-w DIR`: the directory made absolute (aboxd, on this host, reads it
// by that path), seen at the default guest path.
[[nodiscard]] api::WorkspaceSpec WorkspaceSpecFor(const std::string& dir);
// A create's egress from `--egress MODE` and `--allow RULE`...; nullopt when neither was given.
[[nodiscard]] std::optional<api::EgressSpec> EgressSpecFor(const std::string& mode,
                                                           const std::vector<std::string>& allow);

// Registers the commands on `app`; the one parsed sets `*action`.
void AddSandboxCommands(CLI::App& app, Action* action);

}  // namespace abox::cli
