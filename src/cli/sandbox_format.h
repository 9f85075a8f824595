// How the CLI shows the API's sandboxes, execs, events and daemon health to a person (pure
// functions over the api types, decoded by the api codecs; missing facts show as "-").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/api/event.h"
#include "src/api/exec.h"
#include "src/api/sandbox.h"
#include "src/api/system.h"

namespace abox::cli {

// The table of `abox ls`: ID (12 characters) NAME IMAGE STATE CPUS MEM AGE EXPIRES LABELS, for
// `sandboxes`, ages relative to `now`.
[[nodiscard]] std::string SandboxTable(const std::vector<api::Sandbox>& sandboxes, absl::Time now);

// "512 MiB", "2 GiB", "1.5 GiB".
[[nodiscard]] std::string FormatMib(int64_t mib);

// An exec's command as typed: its argv shell-quoted, or "sh -c '<shell>'".
[[nodiscard]] std::string ExecCommandText(const api::Exec& exec);

// One line about an ended or running exec, for `abox logs`:
// "==> exec 4be1c2 at 2026-11-30 16:05:31 UTC: make test -> exited 2 (1.2s)".
[[nodiscard]] std::string ExecHeader(const api::Exec& exec);

// One line per event for `abox events`: "<time>  <type>  <sandbox>  <payload summary>".
[[nodiscard]] std::string EventLine(const api::Event& event);

// `abox daemon status`: key/value lines about the daemon from its health and version objects.
[[nodiscard]] std::string DaemonStatusText(const api::Health& health, const api::Version& version,
                                           const std::string& socket_path);

}  // namespace abox::cli
