// Finds, replaces, appends and removes a block of whole lines in a person's text file (a TOML
// table in Codex's config.toml, a marked section of AGENTS.md) without touching any other byte:
// removing a block that was appended gives back the original text.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace abox::cli {

// Bytes [begin, end) of a run of whole lines.
struct LineSpan {
  size_t begin = 0;
  size_t end = 0;
};

// The TOML table named `table` (its keys, e.g. {"mcp_servers", "abox"}, however the header
// spells them: [mcp_servers.abox], [ mcp_servers . "abox" ]) with the sub-tables that follow it
// ([mcp_servers.abox.env]), up to the next other table header; trailing blank and comment lines
// are left to what follows. A comment line right above the header that starts with
// `lead_comment` belongs to the block. Lines inside multi-line strings and arrays are not
// headers. nullopt when there is no such table.
[[nodiscard]] std::optional<LineSpan> FindTomlTable(std::string_view text,
                                                    const std::vector<std::string>& table,
                                                    std::string_view lead_comment);

// The lines from one that is `begin_marker` to one that is `end_marker` (each alone on its line
// but for surrounding blanks). nullopt when there is no begin marker; kInvalidArgument naming
// `file` when a begin marker has no end marker after it.
[[nodiscard]] absl::StatusOr<std::optional<LineSpan>> FindMarkedSection(
    std::string_view file, std::string_view text, std::string_view begin_marker,
    std::string_view end_marker);

// `text` with `span` replaced by `block` (which ends with a newline), or, with no span, `block`
// appended after one blank line (no blank line in an empty text).
[[nodiscard]] std::string SetBlock(std::string_view text, std::optional<LineSpan> span,
                                   std::string_view block);

// `text` without `span` and one blank line before it: the inverse of appending with SetBlock.
[[nodiscard]] std::string RemoveBlock(std::string_view text, LineSpan span);

// The lines that differ between `before` and `after` as one hunk, from the first line that
// differs to the last: "@@ line N", then "-" lines of before and "+" lines of after. (abox's
// edits are contiguous, so one hunk shows them whole.)
[[nodiscard]] std::string LineDiff(std::string_view before, std::string_view after);

}  // namespace abox::cli
