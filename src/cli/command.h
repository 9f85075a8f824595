// What the CLI's API commands share: the deferred action CLI11 picks, and the daemon connection.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "src/client/api_client.h"

namespace abox::cli {

// What a subcommand does, chosen while parsing and run after it; returns the exit code.
using Action = std::function<int()>;

// A client of aboxd: the socket from $ABOX_SOCKET (else $XDG_RUNTIME_DIR/abox/aboxd.sock, else
// $ABOX_HOME/run/aboxd.sock), the daemon started on demand unless ABOX_NO_AUTOSTART=1 (see
// client::ConnectOrStartDaemon).
[[nodiscard]] absl::StatusOr<std::unique_ptr<client::ApiClient>> ConnectToDaemon();

// Prints "abox: error: <message>" and returns `exit_code`.
int Fail(const absl::Status& status, int exit_code = 1);

// Writes an API answer verbatim to stdout (`--json`), with a final newline; on a terminal, with
// control characters as JSON escapes (terminal_text.h: still the same JSON).
void PrintVerbatim(const std::string& body);

// Connects (ConnectToDaemon) and runs `fn` with the client; a connection failure is printed
// and returns 1.
template <typename Fn>
int WithApi(Fn fn) {
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = ConnectToDaemon();
  if (!api.ok()) {
    return Fail(api.status());
  }
  return fn(**api);
}

}  // namespace abox::cli
