// abox-mcp: the MCP server of abox over stdio (server.h, tools.h). A client of aboxd's API like
// the CLI; starts aboxd when nothing listens. stdout carries only MCP messages; logs go to
// stderr.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "CLI/CLI.hpp"
#include "src/base/io.h"
#include "src/base/version.h"
#include "src/client/daemon_launcher.h"
#include "src/mcp/daemon_connection.h"
#include "src/mcp/exec_sessions.h"
#include "src/mcp/json_rpc.h"
#include "src/mcp/server.h"
#include "src/mcp/tools.h"

namespace abox::mcp {
namespace {

int Main(int argc, char** argv) {
  CLI::App app{
      "abox-mcp: the MCP server of abox (stdio). Register it with your agent, e.g.\n"
      "  claude mcp add abox -- abox-mcp\n"
      "It gives the agent sandboxes to run commands in; the flags below are the person's\n"
      "decisions and are never the model's to change."};
  app.set_version_flag("--version", kVersion);
  ToolOptions options;
  std::string socket;
  app.add_flag("--allow-apply", options.allow_apply,
               "apply_changes writes the sandbox's changes into the host directory (without it, "
               "it answers with the `abox apply ID` command for the person)");
  app.add_flag("--allow-egress-changes", options.allow_egress_changes,
               "egress_request and sandbox_create may widen a sandbox's egress policy (without "
               "it, the person approves names with `abox egress approve`)");
  app.add_flag("--allow-remove-any", options.allow_remove_any,
               "sandbox_remove may remove sandboxes this abox-mcp did not create");
  app.add_option("--socket", socket,
                 "aboxd's socket (default as abox finds it: $ABOX_SOCKET, else "
                 "$XDG_RUNTIME_DIR/abox/aboxd.sock, else $ABOX_HOME/run/aboxd.sock)");
  CLI11_PARSE(app, argc, argv);

  ::signal(SIGPIPE, SIG_IGN);  // a client that went away is seen as EOF / a failed write
  absl::StatusOr<client::DaemonOptions> daemon_options = client::DaemonOptionsFromEnv();
  if (!daemon_options.ok()) {
    std::fprintf(stderr, "abox-mcp: %s\n", std::string(daemon_options.status().message()).c_str());
    return 1;
  }
  if (!socket.empty()) {
    daemon_options->socket_path = socket;
  }
  std::error_code ec;
  options.start_dir = std::filesystem::current_path(ec).string();
  const char* home = std::getenv("HOME");  // NOLINT(concurrency-mt-unsafe): no threads yet
  options.home_dir = home != nullptr ? home : "";

  DaemonConnection daemon(*daemon_options);
  ExecSessions sessions(daemon);
  ToolEnv env(daemon, sessions, options);
  Server server(ServerInfo{"abox", kVersion, Instructions()}, AllTools(env),
                [](const std::string& line) {
                  // A client that stopped reading ends the session (its stdin EOF follows).
                  (void)base::WriteAll(STDOUT_FILENO, line);
                });
  std::fprintf(stderr, "abox-mcp %s: serving MCP on stdio (aboxd socket %s)\n", kVersion,
               daemon_options->socket_path.c_str());
  LineReader reader(STDIN_FILENO);
  server.Serve(reader);
  // Every command this session started dies with it.
  sessions.KillAll();
  return 0;
}

}  // namespace
}  // namespace abox::mcp

int main(int argc, char** argv) { return abox::mcp::Main(argc, argv); }
