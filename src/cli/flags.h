// Parsing of flag values and small text helpers shared by the CLI commands (pure functions).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace abox::cli {

// A duration flag in whole seconds: "30s", "10m", "2h", "1d", combinations such as "1d12h" or
// "1h30m", and "0" (never). Fractions of a second round up. `flag` names the flag in errors.
[[nodiscard]] absl::StatusOr<int64_t> ParseDurationSeconds(std::string_view flag,
                                                           std::string_view text);

// Repeated KEY=VALUE flags (-e, -l) into a map; later repeats win. The key must not be empty;
// the value may be. Errors say "<flag> expects <what>, got '<item>'".
[[nodiscard]] absl::StatusOr<std::map<std::string, std::string>> ParseKeyValues(
    std::string_view flag, std::string_view what, const std::vector<std::string>& items);

// A size flag in MiB: "32G", "32GiB", "500M", "500MiB", "1T" or a bare number of MiB (units are
// binary; "GB" and "MB" are refused as ambiguous). Errors name the flag and the accepted forms.
[[nodiscard]] absl::StatusOr<int64_t> ParseSizeMib(std::string_view flag, std::string_view text);

// How long ago / how far ahead, in the largest whole unit: "45s", "12m", "3h", "2d".
[[nodiscard]] std::string FormatAge(absl::Duration d);

// An argv as a person would type it into a shell: arguments with spaces or shell syntax in single
// quotes ("sh -c 'echo hi'").
[[nodiscard]] std::string ShellJoin(const std::vector<std::string>& argv);

// The last `n` lines of `text` (all of it when it has fewer; a final newline ends the last line).
[[nodiscard]] std::string LastLines(std::string_view text, int n);

}  // namespace abox::cli
