// aboxd: the per-user abox daemon. Owns the sandboxes, their state (SQLite) and the HTTP/JSON API
// on a unix socket. Sandboxes outlive it: stopping or killing aboxd leaves their VMs running,
// and the next aboxd re-attaches.
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "src/base/version.h"
#include "src/daemon/aboxd_main.h"

int main(int argc, char** argv) {
  CLI::App app{
      "aboxd: the abox daemon (one per user). Serves the abox API on a unix socket; "
      "`abox` starts it on demand."};
  app.set_version_flag("--version", std::string("aboxd ") + abox::kVersion);
  abox::daemon::AboxdFlags flags;
  abox::daemon::AddAboxdFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  sigset_t stop_signals = abox::daemon::PrepareProcess(flags);
  auto config = abox::daemon::ConfigFromFlags(flags);
  if (!config.ok()) {
    return abox::daemon::FailStart(std::string(config.status().message()));
  }
  return abox::daemon::ServeUntilStopped(*std::move(config), {}, stop_signals, {});
}
