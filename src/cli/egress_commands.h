// abox egress log | queue | add | rm | policy | approve | deny | ignore: the egress commands
// (clients of aboxd's /v1/egress and /v1/sandboxes/{id}/egress routes).
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "src/api/egress.h"
#include "src/cli/command.h"

namespace abox::cli {

void AddEgressCommands(CLI::App& app, Action* action);

// One row per connection and lookup of GET .../egress/log, newest first, at most `limit`:
// time, kind, name, address:port, verdict, bytes up, bytes down, duration, rule or reason.
std::vector<std::vector<std::string>> EgressLogRows(const api::EgressLog& log, size_t limit);

// What the sandbox lost to its caps, from the dropped counts of GET .../egress/log:
// "(this sandbox's caps dropped: 19000 refused names not queued, ...)", or "" when nothing was.
std::string EgressLogFooter(const api::EgressLog& log);

// A line per sandbox whose review queue was full (queue_full of GET /v1/egress/queue)
// saying how many refused names were not queued and what to do; "" when none was.
std::string EgressQueueFooter(const api::EgressQueue& queue);

}  // namespace abox::cli
