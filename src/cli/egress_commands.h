// abox egress log | queue | add | rm | policy | approve | deny | ignore: the egress commands
// (clients of aboxd's /v1/egress and /v1/sandboxes/{id}/egress routes).
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "src/cli/command.h"

namespace abox::cli {

void AddEgressCommands(CLI::App& app, Action* action);

// One row per connection and lookup of GET .../egress/log, newest first, at most `limit`:
// time, kind, name, address:port, verdict, bytes up, bytes down, duration, rule or reason.
std::vector<std::vector<std::string>> EgressLogRows(const nlohmann::json& log, size_t limit);

}  // namespace abox::cli
