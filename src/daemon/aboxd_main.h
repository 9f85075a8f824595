// What aboxd's main does, shared with the test-only aboxd over a fake VMM
// (src/daemon/testing/aboxd_fake_vmm.cc): its flags, the configuration they resolve to, and
// serving until a stop signal.
#pragma once

#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/daemon/daemon.h"

namespace CLI {
class App;
}  // namespace CLI

namespace abox::daemon {

// aboxd's command line.
struct AboxdFlags {
  std::string socket_path;  // empty: base::ResolveSocketPath()
  int tcp_port = -1;        // -1: no TCP listener
  std::string token_file;
  int max_cpus = 0;             // 0: DefaultBudget()
  int max_memory = 0;           // MiB; 0: DefaultBudget()
  int workspace_quota_mib = 0;  // 0: workspace::StoreBudget{}
  std::string log_level = "info";
  std::string resolver_override_file;
  std::vector<std::string> upstream_ca_files;
  bool no_golden_snapshots = false;
  int pool = -1;
  bool pause_on_stop = false;
  bool pause_when_idle = false;
  int model_requests_per_minute =
      600;                 // idle VMs kept per shape; -1: $ABOX_POOL, else DefaultPoolSize()
  bool foreground = true;  // the only mode; accepted for clarity
};

// Adds aboxd's flags to `app`, parsed into `flags` (which must outlive the parse).
void AddAboxdFlags(CLI::App& app, AboxdFlags& flags);

// Sets the log level and pattern, blocks SIGTERM, SIGINT and SIGHUP in the calling thread (so
// in every thread started later, which inherit the mask) and ignores SIGPIPE. Call before
// building the daemon. Returns the blocked stop signals, for ServeUntilStopped.
[[nodiscard]] sigset_t PrepareProcess(const AboxdFlags& flags);

// The daemon's configuration from the flags and the environment ($ABOX_HOME, $ABOX_SOCKET, ...):
// the host layout, the socket, the TCP listener and its token, the budget, the resolver
// override, the OpenAPI document. Its errors are for "aboxd: error: ...".
[[nodiscard]] absl::StatusOr<DaemonConfig> ConfigFromFlags(const AboxdFlags& flags);

struct ServeOptions {
  // Test knob: keep serving after SIGTERM (SIGINT and SIGHUP still stop it).
  bool ignore_sigterm = false;
  // Runs after the daemon shut down, before the process exits.
  std::function<void()> after_shutdown;
};

// Creates and starts the daemon, logs that it is ready, waits for one of `stop_signals` and
// shuts it down (its sandboxes keep running). Returns main's exit code: 0, or 1 after printing
// "aboxd: error: ..." when it could not start.
[[nodiscard]] int ServeUntilStopped(DaemonConfig config, DaemonDeps deps,
                                    const sigset_t& stop_signals, const ServeOptions& options);

// Prints "aboxd: error: WHAT" and returns the exit code of a daemon that could not start.
[[nodiscard]] int FailStart(const std::string& what);

}  // namespace abox::daemon
