// Reads a person's TOML file (Codex's config.toml) with toml++, only to check it: that it parses
// before abox edits it and still parses after, and what its MCP server entry says. abox never
// writes TOML through a serializer (that would reformat the file and drop its comments): the
// edits are textual (text_block_edit.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace abox::cli {

// kInvalidArgument naming `file`, the line and column, and the parser's reason when `text` is
// not valid TOML.
[[nodiscard]] absl::Status CheckToml(std::string_view file, std::string_view text);

// What a [mcp_servers.NAME] table says.
struct TomlServer {
  std::string command;
  std::vector<std::string> args;
};

// The table mcp_servers.`name` of `text`, nullopt when absent; errors as CheckToml.
[[nodiscard]] absl::StatusOr<std::optional<TomlServer>> ReadTomlServer(std::string_view file,
                                                                       std::string_view text,
                                                                       const std::string& name);

// `text` as a TOML basic string: quoted, with backslash, quote and control characters escaped.
[[nodiscard]] std::string TomlString(std::string_view text);

}  // namespace abox::cli
