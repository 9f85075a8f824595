// aboxd: the per-user abox daemon. Owns the sandboxes, their state (SQLite) and the HTTP/JSON API
// on a unix socket. Sandboxes outlive it: stopping or killing aboxd leaves their VMs running,
// and the next aboxd re-attaches.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/api/openapi_document.h"
#include "src/base/io.h"
#include "src/base/version.h"
#include "src/daemon/egress_service.h"
#include "src/daemon/event_bus.h"
#include "src/daemon/handlers/services.h"
#include "src/daemon/http/server.h"
#include "src/daemon/ledger.h"
#include "src/daemon/sandbox_manager.h"
#include "src/daemon/timer_queue.h"
#include "src/image/paths.h"
#include "src/runtime/sandbox.h"
#include "src/store/database.h"
#include "src/store/egress_repo.h"
#include "src/store/event_repo.h"
#include "src/store/exec_repo.h"
#include "src/store/migrations.h"
#include "src/store/sandbox_repo.h"

namespace {

constexpr int kExitStartFailure = 1;

int Fail(const std::string& what) {
  std::fprintf(stderr, "aboxd: error: %s\n", what.c_str());
  return kExitStartFailure;
}

// A token for the TCP listener: from --token-file, else a fresh one kept in $ABOX_HOME.
absl::StatusOr<std::string> LoadOrCreateToken(const std::string& token_file,
                                              const std::filesystem::path& home) {
  if (!token_file.empty()) {
    auto data = abox::base::ReadFile(token_file, 4096);
    if (!data.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read the token file ", token_file, ": ", data.status().message()));
    }
    std::string token(absl::StripAsciiWhitespace(*data));
    if (token.size() < 16) {
      return absl::InvalidArgumentError(absl::StrCat("the token in ", token_file,
                                                     " is shorter than 16 bytes: use a long "
                                                     "random one (e.g. openssl rand -hex 32)"));
    }
    return token;
  }
  std::string path = (home / "tcp-token").string();
  if (auto existing = abox::base::ReadFile(path, 4096); existing.ok()) {
    std::string token(absl::StripAsciiWhitespace(*existing));
    if (token.size() >= 16) {
      return token;
    }
  }
  std::string token;
  for (int i = 0; i < 4; ++i) {
    token += abox::runtime::NewSandboxId();  // 48 hex characters from std::random_device
  }
  if (absl::Status s = abox::base::WriteFileAtomic(path, token + "\n", 0600); !s.ok()) {
    return s;
  }
  std::fprintf(stderr, "aboxd: TCP bearer token written to %s\n", path.c_str());
  return token;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "aboxd: the abox daemon (one per user). Serves the abox API on a unix socket; "
      "`abox` starts it on demand."};
  app.set_version_flag("--version", std::string("aboxd ") + abox::kVersion);
  std::string socket_path;
  int tcp_port = -1;
  std::string token_file;
  int max_cpus = 0;
  int max_memory = 0;
  std::string log_level = "info";
  std::string resolver_override_file;
  app.add_option("--socket", socket_path,
                 "Unix socket to serve (default: $ABOX_SOCKET, else "
                 "$XDG_RUNTIME_DIR/abox/aboxd.sock, else $ABOX_HOME/run/aboxd.sock)");
  app.add_option("--tcp-port", tcp_port,
                 "Also serve 127.0.0.1:PORT (0 picks one); every request needs the bearer token")
      ->check(CLI::Range(0, 65535));
  app.add_option("--token-file", token_file,
                 "File holding the TCP bearer token (default: $ABOX_HOME/tcp-token, created)");
  app.add_option("--max-cpus", max_cpus,
                 "vCPU budget for all sandboxes together (default: 2 per host core)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--max-memory", max_memory,
                 "Memory budget in MiB for all sandboxes (default: 3/4 of RAM minus 1 GiB)")
      ->check(CLI::Range(128, 1 << 30));
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  app.add_option("--test-resolver-override", resolver_override_file,
                 "TEST ONLY, never in production: a JSON file {\"name\": [\"127.0.0.1\", ...]} "
                 "of fixed answers for the egress proxy's host lookups. These answers skip the "
                 "private-address filter (so hermetic tests reach fake upstreams on loopback); "
                 "every use is flagged in the egress log");
  // aboxd always runs in the foreground (abox, systemd or the user put it in the background);
  // the flag says so explicitly in `abox daemon start --foreground` and in unit files.
  bool foreground = true;
  app.add_flag("--foreground", foreground,
               "Run in the foreground (the only mode; accepted for clarity)");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  // Signals: block them in every thread (threads inherit the mask) and wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto paths = abox::image::ResolvePaths();
  if (!paths.ok()) {
    return Fail(std::string(paths.status().message()));
  }
  std::error_code ec;
  std::filesystem::create_directories(paths->home, ec);
  if (ec) {
    return Fail(absl::StrCat("cannot create $ABOX_HOME ", paths->home.string(), ": ", ec.message(),
                             "; set ABOX_HOME to a writable directory"));
  }
  ::chmod(paths->home.c_str(), 0700);
  if (socket_path.empty()) {
    auto resolved = abox::image::ResolveSocketPath();
    if (!resolved.ok()) {
      return Fail(std::string(resolved.status().message()));
    }
    socket_path = resolved->string();
  }

  // The socket first: its lock says that this is the only aboxd of this user, which recovery
  // below relies on. Clients that connect now wait in the backlog until Start().
  abox::daemon::http::ServerOptions server_options;
  server_options.unix_socket_path = socket_path;
  server_options.worker_threads = 8;
  if (tcp_port >= 0) {
    auto token = LoadOrCreateToken(token_file, paths->home);
    if (!token.ok()) {
      return Fail(std::string(token.status().message()));
    }
    server_options.tcp_port = static_cast<uint16_t>(tcp_port);
    server_options.tcp_bearer_token = *token;
  }

  auto db = abox::store::OpenStateDatabase((paths->home / "state.db").string());
  if (!db.ok()) {
    return Fail(absl::StrCat("cannot open the state database: ", db.status().message()));
  }
  abox::store::SandboxRepo sandbox_repo(**db);
  abox::store::ExecRepo exec_repo(**db);
  abox::store::EventRepo event_repo(**db);
  abox::daemon::EventBus events(event_repo);
  abox::daemon::Budget budget = abox::daemon::DefaultBudget();
  if (max_cpus > 0) {
    budget.cpus = max_cpus;
  }
  if (max_memory > 0) {
    budget.memory_mib = max_memory;
  }
  abox::daemon::Ledger ledger(budget);
  abox::daemon::TimerQueue timers;
  auto vmm = abox::runtime::CreateDefaultVmm();
  if (!vmm.ok()) {
    return Fail(absl::StrCat("cannot set up QEMU: ", vmm.status().message()));
  }
  abox::daemon::EgressServiceOptions egress_options;
  if (!resolver_override_file.empty()) {
    auto text = abox::base::ReadFile(resolver_override_file, 1 << 20);
    if (!text.ok()) {
      return Fail(absl::StrCat("cannot read --test-resolver-override ", resolver_override_file,
                               ": ", text.status().message()));
    }
    auto parsed = abox::net::ParseResolverOverride(*text);
    if (!parsed.ok()) {
      return Fail(absl::StrCat("--test-resolver-override ", resolver_override_file, ": ",
                               parsed.status().message()));
    }
    egress_options.resolver_override = *std::move(parsed);
  }
  abox::store::EgressRepo egress_repo(**db);
  auto egress = abox::daemon::EgressService::Create(egress_repo, events, egress_options);
  if (!egress.ok()) {
    return Fail(absl::StrCat("cannot set up egress: ", egress.status().message()));
  }
  auto workspaces = abox::daemon::WorkspaceService::Create(paths->home.string());
  if (!workspaces.ok()) {
    return Fail(absl::StrCat("cannot set up workspaces: ", workspaces.status().message()));
  }
  abox::daemon::SandboxManager manager({vmm->get(), &sandbox_repo, &exec_repo, &events, &ledger,
                                        &timers, workspaces->get(), egress->get()},
                                       {});
  abox::daemon::Services services;
  services.manager = &manager;
  services.events = &events;
  services.ledger = &ledger;
  services.timers = &timers;
  services.workspaces = workspaces->get();
  services.egress = egress->get();
  services.openapi_yaml = std::string(abox::api::OpenApiYaml());
  abox::daemon::http::Router router;
  if (absl::Status s = abox::daemon::RegisterRoutes(router, services); !s.ok()) {
    return Fail(absl::StrCat("internal: ", s.message()));
  }
  auto server = abox::daemon::http::Server::Create(server_options, std::move(router));
  if (!server.ok()) {
    return Fail(std::string(server.status().message()));
  }
  if (absl::Status s = (*workspaces)->Recover(); !s.ok()) {
    return Fail(absl::StrCat("cannot recover interrupted applies: ", s.message()));
  }
  if (absl::Status s = manager.Recover(); !s.ok()) {
    return Fail(absl::StrCat("cannot recover the sandboxes of the previous run: ", s.message()));
  }
  if (absl::Status s = (*server)->Start(); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  abox::daemon::LedgerUsage usage = ledger.Usage();
  spdlog::info("aboxd {} ready on {} (pid {}; budget {} vCPUs, {} MiB; {} sandbox(es) running){}",
               abox::kVersion, socket_path, ::getpid(), usage.budget.cpus, usage.budget.memory_mib,
               manager.RunningCount(),
               tcp_port >= 0 ? absl::StrCat("; TCP 127.0.0.1:", (*server)->tcp_port()) : "");

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("aboxd: {} received: stopping (sandboxes keep running)", strsignal(signal_number));
  (*server)->Stop();
  manager.DetachAll();
  timers.Stop();
  spdlog::info("aboxd stopped");
  return 0;
}
