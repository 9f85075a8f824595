// How the host runs the workspace tools inside a sandbox (`abox-guest ws manifest|unpack|pack`,
// see src/guest/workspace_tool.h). The daemon runs them as root over the agent channel
// (runtime::AgentGuestTools); tests run the same tool code on a local directory. Everything a
// tool writes to stdout comes from the guest: the caller treats it as untrusted input.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace abox::workspace {

class GuestTools {
 public:
  // Writes stdin bytes; fails once the tool stopped reading.
  using WriteFn = std::function<absl::Status(absl::string_view)>;
  // Produces the tool's whole stdin through `write`, then returns (stdin is closed after).
  using InputFn = std::function<absl::Status(const WriteFn& write)>;
  // Receives the tool's stdout, chunk by chunk.
  using OutputFn = std::function<absl::Status(absl::string_view)>;

  virtual ~GuestTools() = default;

  // Runs `abox-guest ws <args...>`. Fails when the tool exits non-zero (with its stderr, bounded)
  // or when `input` / `output` fail; stdin is written fully before stdout is read, which the
  // tools allow (each reads all of stdin before it writes more than a line).
  [[nodiscard]] virtual absl::Status Run(const std::vector<std::string>& args, const InputFn& input,
                                         const OutputFn& output) = 0;
};

}  // namespace abox::workspace
