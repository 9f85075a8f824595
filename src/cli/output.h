// User-facing output helpers shared by the CLI commands.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace abox::cli {

// Prints "abox: error: <message>" to stderr (on a terminal with its control characters shown:
// terminal_text.h).
void PrintError(const absl::Status& status);

// Renders rows as an aligned text table with a header row.
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

// "1.2 GiB", "512 MiB", "12 KiB", "900 B".
std::string HumanBytes(uint64_t bytes);

}  // namespace abox::cli
