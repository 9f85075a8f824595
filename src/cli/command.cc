#include "src/cli/command.h"

#include <cstdio>

#include "src/cli/output.h"
#include "src/cli/terminal_text.h"
#include "src/client/daemon_launcher.h"

namespace abox::cli {

absl::StatusOr<std::unique_ptr<client::ApiClient>> ConnectToDaemon() {
  absl::StatusOr<client::DaemonOptions> options = client::DaemonOptionsFromEnv();
  if (!options.ok()) {
    return options.status();
  }
  return client::ConnectOrStartDaemon(*options);
}

int Fail(const absl::Status& status, int exit_code) {
  PrintError(status);
  return exit_code;
}

void PrintVerbatim(const std::string& body) {
  std::string text = JsonForTerminal(stdout, body);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (text.empty() || text.back() != '\n') {
    std::fputc('\n', stdout);
  }
}

}  // namespace abox::cli
