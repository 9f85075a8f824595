// Command-line mistakes explained: an unknown flag or command is refused with its nearest correct
// spelling ("--memroy" -> "--memory"), never dropped. A dropped typo changes what runs: `abox run
// --memroy 2048` would give the default 512 MiB VM, `--rot` would run as the agent user, and
// `abox exec --tiemout 1 ID` would take `1` for the sandbox.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace abox::cli {

// Edit distance with adjacent swaps (optimal string alignment): insertions, deletions,
// substitutions and transpositions of two neighbouring characters cost 1 each.
[[nodiscard]] int EditDistance(std::string_view a, std::string_view b);

// The candidate `typed` most likely misspells, "" when none is near enough. Leading dashes and
// an "=VALUE" are ignored in the comparison ("-root" finds "--root"); near enough is at most 2
// edits and at most a third of the longer name, or a prefix of exactly one candidate.
[[nodiscard]] std::string NearestSpelling(std::string_view typed,
                                          const std::vector<std::string>& candidates);

// "abox run" for `abox run`'s CLI::App.
[[nodiscard]] std::string CommandPath(const CLI::App& app);

// kInvalidArgument: "abox run: unknown flag --memroy; did you mean --memory? (`abox run --help`
// lists the flags)".
[[nodiscard]] absl::Status UnknownFlag(const CLI::App& app, std::string_view arg);

// For a command whose own command line follows its options (CLI11's prefix_command: `abox run`,
// `abox exec`), which CLI11 hands back in remaining() together with any flag it did not know:
// such a flag (an argument starting with '-' before the command line) is an UnknownFlag() error.
[[nodiscard]] absl::Status CheckCommandStart(const CLI::App& app,
                                             const std::vector<std::string>& remaining);

// The command line of `abox run` / `abox exec`: the words CLI11 handed back (remaining(), checked
// with CheckCommandStart), then, when argv had a `--` (cut off before parsing), the `--` and
// `tail` too if a command word came before it, else `tail` alone.
[[nodiscard]] std::vector<std::string> CommandLine(std::vector<std::string> words,
                                                   bool had_separator,
                                                   const std::vector<std::string>& tail);

// Parses argv into `app` like CLI11_PARSE. Returns nullopt when the command line is fine, else
// the exit code, having printed the error (or the help or version asked for). Unknown flags and
// commands get their nearest spelling and exit code 2; other CLI11 errors print as CLI11 prints
// them.
[[nodiscard]] std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

}  // namespace abox::cli
