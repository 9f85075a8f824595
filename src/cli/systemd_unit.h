// A systemd user unit that runs aboxd (`abox daemon unit`).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace abox::cli {

// The unit file: Type=simple, ExecStart=<argv> (aboxd, which stays in the foreground, on an
// explicit socket),
// Environment= for each of `env` (so the service uses the same ABOX_HOME as this shell),
// Restart=on-failure, WantedBy=default.target, and comment lines saying how to install it.
// Values are escaped for systemd (quotes, '%' specifiers, '$' expansion in ExecStart).
[[nodiscard]] std::string SystemdUnit(const std::vector<std::string>& argv,
                                      const std::map<std::string, std::string>& env);

// Where systemd looks for the user's units: $XDG_CONFIG_HOME/systemd/user/aboxd.service, else
// ~/.config/systemd/user/aboxd.service.
[[nodiscard]] absl::StatusOr<std::string> SystemdUnitPath();

// The command that loads and starts an installed unit.
inline constexpr char kSystemdEnableCommand[] =
    "systemctl --user daemon-reload && systemctl --user enable --now aboxd";

}  // namespace abox::cli
