#include "src/mcp/daemon_connection.h"

namespace abox::mcp {

absl::StatusOr<std::unique_ptr<client::ApiClient>> DaemonConnection::NewClient() {
  std::lock_guard<std::mutex> lock(mu_);
  if (reached_) {
    return client::ApiClient::Create(options_.socket_path);
  }
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = client::ConnectOrStartDaemon(options_);
  if (api.ok()) {
    reached_ = true;
  }
  return api;
}

}  // namespace abox::mcp
