// What the CLI's API commands share: the deferred action CLI11 picks, and the daemon connection.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/client/api_client.h"

namespace abox::cli {

// What a subcommand does, chosen while parsing and run after it; returns the exit code.
using Action = std::function<int()>;

// A client of aboxd: the socket from $ABOX_SOCKET (else $XDG_RUNTIME_DIR/abox/aboxd.sock), the
// daemon started on demand unless ABOX_NO_AUTOSTART=1 (see client::ConnectOrStartDaemon).
[[nodiscard]] absl::StatusOr<std::unique_ptr<client::ApiClient>> ConnectToDaemon();

// Prints "abox: error: <message>" and returns `exit_code`.
int Fail(const absl::Status& status, int exit_code = 1);

// Writes an API answer verbatim to stdout (`--json`), with a final newline.
void PrintVerbatim(const std::string& body);

}  // namespace abox::cli
