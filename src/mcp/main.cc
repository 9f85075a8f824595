// abox-mcp: the MCP server of abox over stdio (server.h, tools.h), or over Streamable HTTP on
// 127.0.0.1 with --http (http_transport.h). A client of aboxd's API like the CLI; starts aboxd
// when a tool first needs it. stdout carries only MCP messages; logs go to stderr.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "src/base/host_layout.h"
#include "src/base/io.h"
#include "src/base/version.h"
#include "src/client/daemon_launcher.h"
#include "src/mcp/daemon_connection.h"
#include "src/mcp/exec_sessions.h"
#include "src/mcp/http_guard.h"
#include "src/mcp/http_transport.h"
#include "src/mcp/json_rpc.h"
#include "src/mcp/server.h"
#include "src/mcp/tools.h"

namespace abox::mcp {
namespace {

// What one HTTP session's tools share; destroying it kills the commands the session started.
struct SessionState {
  SessionState(DaemonConnection& daemon, const ToolOptions& options)
      : sessions(daemon), env(daemon, sessions, options) {}
  ExecSessions sessions;
  ToolEnv env;
};

struct HttpFlags {
  std::string listen;
  std::string token_file;
  bool no_auth = false;
};

// Serves Streamable HTTP until SIGINT or SIGTERM, then ends every session.
int ServeHttp(const HttpFlags& flags, DaemonConnection& daemon, const ToolOptions& options,
              const std::string& socket_path) {
  // The HTTP server logs through spdlog, whose default logger writes to stdout.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("abox-mcp-http"));
  spdlog::set_level(spdlog::level::warn);
  absl::StatusOr<ListenAddress> listen = ParseListenAddress(flags.listen);
  if (!listen.ok()) {
    std::fprintf(stderr, "abox-mcp: %s\n", std::string(listen.status().message()).c_str());
    return 2;
  }
  HttpTransportOptions http_options;
  http_options.listen = *listen;
  std::string token_path;
  if (flags.no_auth) {
    http_options.no_auth = true;
    std::fprintf(stderr,
                 "abox-mcp: WARNING: --no-auth: any local process can drive this server; "
                 "for tests only\n");
  } else {
    absl::StatusOr<base::HostLayout> layout = base::ResolveHostLayout();
    absl::StatusOr<std::string> token =
        layout.ok() ? LoadOrCreateToken(flags.token_file, layout->home, &token_path)
                    : absl::StatusOr<std::string>(layout.status());
    if (!token.ok()) {
      std::fprintf(stderr, "abox-mcp: %s\n", std::string(token.status().message()).c_str());
      return 1;
    }
    http_options.bearer_token = *token;
  }
  // Block the stop signals in every thread (threads inherit the mask) and wait for them here.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  auto factory = [&daemon, &options] {
    auto state = std::make_shared<SessionState>(daemon, options);
    std::vector<Tool> tools = AllTools(state->env);
    return SessionTools{std::move(tools), std::move(state)};
  };
  absl::StatusOr<std::unique_ptr<HttpTransport>> transport = HttpTransport::Create(
      std::move(http_options), ServerInfo{"abox", kVersion, Instructions()}, factory);
  absl::Status started = transport.ok() ? (*transport)->Start() : transport.status();
  if (!started.ok()) {
    std::fprintf(stderr, "abox-mcp: cannot serve HTTP: %s\n",
                 std::string(started.message()).c_str());
    return 1;
  }
  // One line a script can parse for the port (with --http 127.0.0.1:0).
  std::fprintf(stderr, "abox-mcp %s: listening on http://127.0.0.1:%u/mcp (aboxd socket %s)\n",
               kVersion, static_cast<unsigned>((*transport)->port()), socket_path.c_str());
  if (!token_path.empty()) {
    std::fprintf(stderr, "abox-mcp: send Authorization: Bearer <the token in %s>\n",
                 token_path.c_str());
  }
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  std::fprintf(stderr, "abox-mcp: signal %d; ending every session\n", signal_number);
  (*transport)->Stop();
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "abox-mcp: the MCP server of abox (stdio, or Streamable HTTP with --http). Register it\n"
      "with your agent, e.g.\n"
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
  app.add_option("--allow-secret", options.allowed_secrets,
                 "sandbox_create may give a sandbox this secret (abox secret set NAME ...): the "
                 "sandbox gets a placeholder, the proxy adds the value for the secret's hosts "
                 "(repeatable; without it, no secret)");
  app.add_flag("--allow-remove-any", options.allow_remove_any,
               "sandbox_remove and sandbox_restore may act on sandboxes this session did not "
               "create (a session: this abox-mcp on stdio, one Mcp-Session-Id over --http)");
  HttpFlags http;
  app.add_option("--http", http.listen,
                 "serve MCP over Streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio "
                 "(127.0.0.1:0 picks a free port; the bound one is printed on stderr). Every "
                 "request needs Authorization: Bearer <token>");
  app.add_option("--token-file", http.token_file,
                 "with --http: the file holding the bearer token (default: $ABOX_HOME/mcp-token, "
                 "created 0600 with a random token when missing)");
  app.add_flag("--no-auth", http.no_auth,
               "TEST ONLY, never for real use: with --http, accept requests without the bearer "
               "token (the MCP conformance suite cannot send one). Host and Origin are still "
               "checked, but any local process can then drive your sandboxes");
  app.add_option("--socket", socket,
                 "aboxd's socket (default as abox finds it: $ABOX_SOCKET, else "
                 "$XDG_RUNTIME_DIR/abox/aboxd.sock, else $ABOX_HOME/run/aboxd.sock)");
  CLI11_PARSE(app, argc, argv);
  if (http.listen.empty() && (http.no_auth || !http.token_file.empty())) {
    std::fprintf(stderr, "abox-mcp: --no-auth and --token-file go with --http\n");
    return 2;
  }
  if (http.no_auth && !http.token_file.empty()) {
    std::fprintf(stderr, "abox-mcp: --no-auth and --token-file exclude each other\n");
    return 2;
  }

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
  if (!http.listen.empty()) {
    return ServeHttp(http, daemon, options, daemon_options->socket_path);
  }
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
