// A stand-in for aboxd in the client's and the CLI's tests: the real HTTP server (unix socket,
// lock file with the pid) answering GET /v1/health and GET /v1/version, the sandbox API of
// FakeSandboxApi (execs run as local processes), stopping on SIGTERM.
//
//   fake_aboxd --socket PATH [--fail MESSAGE] [--delay-ms N] [--hang] [--ignore-sigterm]
//
// --fail prints MESSAGE to stderr and exits 3 (like aboxd refusing to start); --delay-ms waits
// before listening; --hang never listens; --ignore-sigterm keeps serving after SIGTERM.
// aboxd's --max-cpus N sets the ledger's vCPU budget; --max-memory, --tcp-port, --token-file and
// --log-level are accepted and ignored; other flags are refused, as aboxd refuses them.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "src/client/testing/fake_sandbox_api.h"
#include "src/daemon/http/router.h"
#include "src/daemon/http/server.h"

namespace {

using abox::daemon::http::Request;
using abox::daemon::http::Responder;

int Serve(const std::string& socket, bool ignore_sigterm, int max_cpus) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before the server's threads start

  auto started = std::chrono::steady_clock::now();
  abox::client::testing::FakeSandboxApi api;  // outlives the server
  abox::daemon::http::Router router;
  api.AddRoutes(router);
  (void)router.Add("GET", "/v1/health", [started, &api, max_cpus](Request&, Responder& out) {
    double uptime =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    out.Json(200, {{"status", "ok"},
                   {"pid", ::getpid()},
                   {"uptime_seconds", uptime},
                   {"sandboxes", api.RunningSandboxes()},
                   {"accel", "tcg"},
                   {"ledger",
                    {{"cpus_used", 0},
                     {"cpus_budget", max_cpus},
                     {"memory_mib_used", 0},
                     {"memory_mib_budget", 8192}}}});
  });
  (void)router.Add("GET", "/v1/version", [](Request&, Responder& out) {
    out.Json(200, {{"version", "0.0.0-fake"}, {"api", "1"}, {"protocol", 1}});
  });
  abox::daemon::http::ServerOptions options;
  options.unix_socket_path = socket;
  auto server = abox::daemon::http::Server::Create(options, std::move(router));
  if (!server.ok()) {
    std::fprintf(stderr, "fake aboxd: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  if (auto s = (*server)->Start(); !s.ok()) {
    std::fprintf(stderr, "fake aboxd: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "fake aboxd: listening on %s\n", socket.c_str());
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) == 0 && !(ignore_sigterm && sig == SIGTERM)) {
      break;
    }
  }
  (*server)->Stop();
  server->reset();
  std::fprintf(stderr, "fake aboxd: stopped\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket;
  std::string fail;
  int delay_ms = 0;
  bool hang = false;
  bool ignore_sigterm = false;
  int max_cpus = 4;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string next = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--socket") {
      socket = next;
      ++i;
    } else if (arg == "--fail") {
      fail = next;
      ++i;
    } else if (arg == "--delay-ms") {
      (void)absl::SimpleAtoi(next, &delay_ms);
      ++i;
    } else if (arg == "--hang") {
      hang = true;
    } else if (arg == "--ignore-sigterm") {
      ignore_sigterm = true;
    } else if (arg == "--max-cpus") {
      (void)absl::SimpleAtoi(next, &max_cpus);
      ++i;
    } else if (arg == "--max-memory" || arg == "--tcp-port" || arg == "--token-file" ||
               arg == "--log-level") {
      ++i;
    } else {
      std::fprintf(stderr, "fake aboxd: unknown flag %s\n", arg.c_str());
      return 2;
    }
  }
  if (!fail.empty()) {
    std::fprintf(stderr, "%s\n", fail.c_str());
    return 3;
  }
  if (socket.empty()) {
    std::fprintf(stderr, "fake aboxd: --socket is required\n");
    return 2;
  }
  if (hang) {
    for (;;) {
      ::pause();
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  return Serve(socket, ignore_sigterm, max_cpus);
}
