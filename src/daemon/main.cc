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
#include "src/base/host_layout.h"
#include "src/base/io.h"
#include "src/base/version.h"
#include "src/daemon/daemon.h"
#include "src/runtime/sandbox.h"

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

  auto layout = abox::base::ResolveHostLayout();
  if (!layout.ok()) {
    return Fail(std::string(layout.status().message()));
  }
  abox::daemon::DaemonConfig config;
  config.layout = *layout;
  if (socket_path.empty()) {
    auto resolved = abox::base::ResolveSocketPath();
    if (!resolved.ok()) {
      return Fail(std::string(resolved.status().message()));
    }
    socket_path = resolved->string();
  }
  config.server.unix_socket_path = socket_path;
  config.server.worker_threads = 8;
  if (tcp_port >= 0) {
    std::error_code ec;
    std::filesystem::create_directories(layout->home, ec);
    auto token = LoadOrCreateToken(token_file, layout->home);
    if (!token.ok()) {
      return Fail(std::string(token.status().message()));
    }
    config.server.tcp_port = static_cast<uint16_t>(tcp_port);
    config.server.tcp_bearer_token = *token;
  }
  config.budget = abox::daemon::DefaultBudget();
  if (max_cpus > 0) {
    config.budget.cpus = max_cpus;
  }
  if (max_memory > 0) {
    config.budget.memory_mib = max_memory;
  }
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
    config.egress.resolver_override = *std::move(parsed);
  }
  config.openapi_yaml = std::string(abox::api::OpenApiYaml());

  auto daemon = abox::daemon::Daemon::Create(std::move(config), {});
  if (!daemon.ok()) {
    return Fail(std::string(daemon.status().message()));
  }
  if (absl::Status s = (*daemon)->Start(); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  abox::daemon::LedgerUsage usage = (*daemon)->ledger().Usage();
  spdlog::info(
      "aboxd {} ready on {} (pid {}; budget {} vCPUs, {} MiB; {} sandbox(es) running){}",
      abox::kVersion, socket_path, ::getpid(), usage.budget.cpus, usage.budget.memory_mib,
      (*daemon)->sandboxes().RunningCount(),
      tcp_port >= 0 ? absl::StrCat("; TCP 127.0.0.1:", (*daemon)->server().tcp_port()) : "");

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("aboxd: {} received: stopping (sandboxes keep running)", strsignal(signal_number));
  (*daemon)->Shutdown();
  spdlog::info("aboxd stopped");
  return 0;
}
