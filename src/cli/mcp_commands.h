// `abox mcp install|uninstall|status`: wiring abox-mcp, the MCP server, into Claude Code, Codex
// and Cursor (the work is in mcp_install.h; this is the command line and the output).
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "src/cli/command.h"
#include "src/cli/mcp_install.h"

namespace abox::cli {

// Registers `mcp` and its subcommands on `app`; the one parsed sets `*action`.
void AddMcpCommands(CLI::App& app, Action* action);

// What install/uninstall did (or would do), for a person: the files with their actions, the
// backups, the server command and what to do next. `installing` picks the words.
[[nodiscard]] std::string McpReportText(const McpReport& report, const McpServerCommand& server,
                                        bool installing);

// The same for scripts (`--json`).
[[nodiscard]] nlohmann::ordered_json McpReportJson(const McpReport& report,
                                                   const McpServerCommand& server);

}  // namespace abox::cli
