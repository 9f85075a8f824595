// abox-mcp's way to aboxd: clients of its API (src/client), starting aboxd on first use the way
// the CLI does (client::ConnectOrStartDaemon), not when abox-mcp starts, so that initialize
// answers at once whatever the daemon's state. Thread-safe: each caller gets its own client
// (an ApiClient is for one thread at a time).
#pragma once

#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "src/client/api_client.h"
#include "src/client/daemon_launcher.h"

namespace abox::mcp {

class DaemonConnection final {
 public:
  explicit DaemonConnection(client::DaemonOptions options) : options_(std::move(options)) {}
  DaemonConnection(const DaemonConnection&) = delete;
  DaemonConnection& operator=(const DaemonConnection&) = delete;

  // A new client of the daemon; the first call starts aboxd when nothing listens (unless
  // autostart is off).
  [[nodiscard]] absl::StatusOr<std::unique_ptr<client::ApiClient>> NewClient();

 private:
  client::DaemonOptions options_;
  std::mutex mu_;
  bool reached_ = false;  // guarded by mu_
};

}  // namespace abox::mcp
