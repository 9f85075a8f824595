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

// What the sandbox lost to its caps, from the "dropped" object of GET .../egress/log:
// "(this sandbox's caps dropped: 19000 refused names not queued, ...)", or "" when nothing was.
std::string EgressLogFooter(const nlohmann::json& log);

// A line per sandbox whose review queue was full (the "queue_full" list of GET /v1/egress/queue)
// saying how many refused names were not queued and what to do; "" when none was.
std::string EgressQueueFooter(const nlohmann::json& queue);

}  // namespace abox::cli
