#include "src/daemon/aboxd_main.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/api/openapi_document.h"
#include "src/api/sandbox.h"
#include "src/base/host_layout.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/version.h"
#include "src/daemon/services/ledger.h"
#include "src/net/host_resolver.h"
#include "src/runtime/sandbox.h"

namespace abox::daemon {
namespace {

constexpr int kExitStartFailure = 1;

// A token for the TCP listener: from --token-file, else a fresh one kept in $ABOX_HOME.
absl::StatusOr<std::string> LoadOrCreateToken(const std::string& token_file,
                                              const std::filesystem::path& home) {
  if (!token_file.empty()) {
    auto data = base::ReadFile(token_file, 4096);
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
  if (auto existing = base::ReadFile(path, 4096); existing.ok()) {
    std::string token(absl::StripAsciiWhitespace(*existing));
    if (token.size() >= 16) {
      return token;
    }
  }
  std::string token;
  for (int i = 0; i < 4; ++i) {
    token += runtime::NewSandboxId();  // 48 hex characters from std::random_device
  }
  if (absl::Status s = base::WriteFileAtomic(path, token + "\n", 0600); !s.ok()) {
    return s;
  }
  std::fprintf(stderr, "aboxd: TCP bearer token written to %s\n", path.c_str());
  return token;
}

// --pool, else $ABOX_POOL, else what the budget allows.
absl::StatusOr<int> PoolSizeFrom(int flag, const Budget& budget) {
  if (flag >= 0) {
    return flag;
  }
  const char* env = std::getenv("ABOX_POOL");  // NOLINT(concurrency-mt-unsafe): before threads
  if (env != nullptr && env[0] != '\0') {
    int n = 0;
    if (!absl::SimpleAtoi(env, &n) || n < 0 || n > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("ABOX_POOL=", env, " is not a pool size: give 0 to 64, or unset it"));
    }
    return n;
  }
  return DefaultPoolSize(budget, static_cast<int>(api::SandboxCreate{}.memory_mib));
}

}  // namespace

void AddAboxdFlags(CLI::App& app, AboxdFlags& flags) {
  app.add_option("--socket", flags.socket_path,
                 "Unix socket to serve (default: $ABOX_SOCKET, else "
                 "$XDG_RUNTIME_DIR/abox/aboxd.sock, else $ABOX_HOME/run/aboxd.sock)");
  app.add_option("--tcp-port", flags.tcp_port,
                 "Also serve 127.0.0.1:PORT (0 picks one); every request needs the bearer token")
      ->check(CLI::Range(0, 65535));
  app.add_option("--token-file", flags.token_file,
                 "File holding the TCP bearer token (default: $ABOX_HOME/tcp-token, created)");
  app.add_option("--max-cpus", flags.max_cpus,
                 "vCPU budget for all sandboxes together (default: 2 per host core)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--max-memory", flags.max_memory,
                 "Memory budget in MiB for all sandboxes (default: 3/4 of RAM minus 1 GiB)")
      ->check(CLI::Range(128, 1 << 30));
  app.add_option("--workspace-quota", flags.workspace_quota_mib,
                 "MiB of the host's disk one sandbox's changed workspace files may take when "
                 "diff, apply or pull fetch them (default 4096)")
      ->check(CLI::Range(16, 1 << 24));
  app.add_flag("--no-golden-snapshots", flags.no_golden_snapshots,
               "Boot every sandbox (as `abox create --cold` does) instead of restoring a golden "
               "snapshot of its image, made by the first create of each image and size");
  app.add_option("--pool", flags.pool,
                 "Idle VMs kept restored and ready per image and size, so that a create takes "
                 "one instead of restoring (0: none). They count in the budget and give way to "
                 "sandboxes. Default: $ABOX_POOL, else up to 2 as the memory budget allows")
      ->check(CLI::Range(0, 64));
  app.add_flag("--pause-on-stop", flags.pause_on_stop,
               "When aboxd stops, pause the running sandboxes (saved to disk, their VMs end) "
               "instead of leaving them running; each resumes on its next command or abox resume, "
               "after a host reboot too");
  app.add_flag("--pause-when-idle", flags.pause_when_idle,
               "A sandbox's idle timeout pauses it (saved to disk) instead of stopping it");
  app.add_option("--model-requests-per-minute", flags.model_requests_per_minute,
                 "Requests per minute each sandbox's agents may send through the model broker "
                 "(bursts of a tenth of it; at most 16 at once); more get 429 and are logged")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  app.add_option("--test-resolver-override", flags.resolver_override_file,
                 "TEST ONLY, never in production: a JSON file {\"name\": [\"127.0.0.1\", ...]} "
                 "of fixed answers for the egress proxy's host lookups. These answers skip the "
                 "private-address filter (so hermetic tests reach fake upstreams on loopback); "
                 "every use is flagged in the egress log");
  app.add_option("--test-upstream-ca", flags.upstream_ca_files,
                 "TEST ONLY: a PEM CA file trusted, on top of the host's trust store, for the "
                 "upstream servers of connections the proxy terminates for secrets (repeatable)");
  // aboxd always runs in the foreground (abox, systemd or the user put it in the background);
  // the flag says so explicitly in `abox daemon start --foreground` and in unit files.
  app.add_flag("--foreground", flags.foreground,
               "Run in the foreground (the only mode; accepted for clarity)");
}

sigset_t PrepareProcess(const AboxdFlags& flags) {
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  // Signals: block them in every thread (threads inherit the mask) and wait for them in
  // ServeUntilStopped.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

absl::StatusOr<DaemonConfig> ConfigFromFlags(const AboxdFlags& flags) {
  auto layout = base::ResolveHostLayout();
  if (!layout.ok()) {
    return layout.status();
  }
  DaemonConfig config;
  config.layout = *layout;
  std::string socket_path = flags.socket_path;
  if (socket_path.empty()) {
    auto resolved = base::ResolveSocketPath();
    if (!resolved.ok()) {
      return resolved.status();
    }
    socket_path = resolved->string();
  }
  config.server.unix_socket_path = socket_path;
  config.server.worker_threads = 8;
  if (flags.tcp_port >= 0) {
    std::error_code ec;
    std::filesystem::create_directories(layout->home, ec);
    auto token = LoadOrCreateToken(flags.token_file, layout->home);
    if (!token.ok()) {
      return token.status();
    }
    config.server.tcp_port = static_cast<uint16_t>(flags.tcp_port);
    config.server.tcp_bearer_token = *token;
  }
  config.budget = DefaultBudget();
  if (flags.max_cpus > 0) {
    config.budget.cpus = flags.max_cpus;
  }
  if (flags.max_memory > 0) {
    config.budget.memory_mib = flags.max_memory;
  }
  config.sandbox.golden_snapshots = !flags.no_golden_snapshots;
  ABOX_ASSIGN_OR_RETURN(config.pool.size, PoolSizeFrom(flags.pool, config.budget));
  api::SandboxCreate defaults;
  if (std::filesystem::exists(layout->ImageDir(defaults.image))) {
    // The default image's default size from the start; other images and sizes once a create
    // asks for them.
    config.pool_shapes.push_back({.image = defaults.image,
                                  .cpus = static_cast<int>(defaults.cpus),
                                  .memory_mib = static_cast<int>(defaults.memory_mib),
                                  .disk_mib = defaults.disk_mib});
  }
  config.sandbox.guest_identity = true;
  config.sandbox.pause_on_stop = flags.pause_on_stop;
  config.sandbox.pause_when_idle = flags.pause_when_idle;
  config.model_requests_per_minute = flags.model_requests_per_minute;
  if (flags.workspace_quota_mib > 0) {
    config.workspace_budget.guest_bytes = static_cast<uint64_t>(flags.workspace_quota_mib) << 20;
  }
  if (const std::string& file = flags.resolver_override_file; !file.empty()) {
    auto text = base::ReadFile(file, 1 << 20);
    if (!text.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read --test-resolver-override ", file,
                                                     ": ", text.status().message()));
    }
    auto parsed = net::ParseResolverOverride(*text);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--test-resolver-override ", file, ": ", parsed.status().message()));
    }
    config.egress.resolver_override = *std::move(parsed);
  }
  config.upstream_ca_files = flags.upstream_ca_files;
  config.openapi_yaml = std::string(api::OpenApiYaml());
  return config;
}

int ServeUntilStopped(DaemonConfig config, DaemonDeps deps, const sigset_t& stop_signals,
                      const ServeOptions& options) {
  std::string socket_path = config.server.unix_socket_path;
  const bool config_pause_on_stop = config.sandbox.pause_on_stop;
  bool tcp = config.server.tcp_port.has_value();
  auto daemon = Daemon::Create(std::move(config), std::move(deps));
  if (!daemon.ok()) {
    return FailStart(std::string(daemon.status().message()));
  }
  if (absl::Status s = (*daemon)->Start(); !s.ok()) {
    return FailStart(std::string(s.message()));
  }
  LedgerUsage usage = (*daemon)->ledger().Usage();
  WarmPool* pool = (*daemon)->pool();
  spdlog::info(
      "aboxd {} ready on {} (pid {}; budget {} vCPUs, {} MiB; warm pool {} per image and size; {} "
      "sandbox(es) running){}",
      kVersion, socket_path, ::getpid(), usage.budget.cpus, usage.budget.memory_mib,
      pool != nullptr ? pool->Status().size : 0, (*daemon)->sandboxes().RunningCount(),
      tcp ? absl::StrCat("; TCP 127.0.0.1:", (*daemon)->server().tcp_port()) : "");

  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) != 0 ||
         (options.ignore_sigterm && signal_number == SIGTERM)) {
    if (signal_number == SIGTERM) {
      spdlog::info("aboxd: SIGTERM received and ignored (--ignore-sigterm)");
    }
  }
  spdlog::info("aboxd: {} received: stopping (sandboxes {})", strsignal(signal_number),
               config_pause_on_stop ? "are paused to disk" : "keep running");
  (*daemon)->Shutdown();
  daemon->reset();
  if (options.after_shutdown) {
    options.after_shutdown();
  }
  spdlog::info("aboxd stopped");
  return 0;
}

int FailStart(const std::string& what) {
  std::fprintf(stderr, "aboxd: error: %s\n", what.c_str());
  return kExitStartFailure;
}

}  // namespace abox::daemon
