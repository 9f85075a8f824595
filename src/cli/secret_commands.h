// abox secret set|ls|rm: secrets that never enter a VM (issue 15). The CLI reads a stored
// secret's value (from the environment, a file or stdin: never argv) and hands it to aboxd over
// its socket; aboxd keeps it in the keyring or a 0600 file.
#pragma once

#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "src/cli/command.h"

namespace abox::cli {

void AddSecretCommands(CLI::App& app, Action* action);

// A stored secret's value from exactly the one source given: the variable `from_env`, the file
// `from_file` (one trailing newline dropped), or stdin (asked for without echo on a terminal);
// nullopt when none is given.
[[nodiscard]] absl::StatusOr<std::optional<std::string>> ReadSecretValue(
    const std::string& name, const std::string& from_env, const std::string& from_file,
    bool from_stdin);
// Overwrites the bytes of `s` and empties it (best effort).
void WipeString(std::string& s);

}  // namespace abox::cli
