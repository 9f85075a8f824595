// Edits one member of a person's JSON file (an MCP client's config) as text: every byte outside
// the member set or removed stays as it was, so the person's key order, indentation, escapes and
// number spellings survive, and removing what was set gives back the original bytes.
//
// The text is untrusted input: it is checked with nlohmann::json (no exceptions) before it is
// edited, and a file that does not parse, or has comments, is refused with its line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace abox::cli {

// Parses a person's JSON file. kInvalidArgument naming `file` and the line when it does not
// parse, has // or /* */ comments (refused rather than dropped), or is not an object. Empty (or
// whitespace-only) text is an empty object: a file about to be created.
[[nodiscard]] absl::StatusOr<nlohmann::ordered_json> ParseUserJson(std::string_view file,
                                                                   std::string_view text);

// `text` with the member at `path` (e.g. {"mcpServers", "abox"}) set to `value`, creating the
// objects on the way. An existing member's value is replaced in place; a new member goes last in
// its object, in the object's layout (one member per line with its indentation, or all on one
// line). Empty `text` gives a new file. Errors: the text does not parse (ParseUserJson), or a
// member on the way is not an object.
[[nodiscard]] absl::StatusOr<std::string> SetJsonMember(std::string_view file,
                                                        std::string_view text,
                                                        const std::vector<std::string>& path,
                                                        const nlohmann::ordered_json& value);

// `text` without the member at `path` (unchanged when it is absent). When that leaves its object
// empty and `prune_parent` is set, the parent member holding that object goes too (the inverse of
// SetJsonMember having created it). Removing the last member of an object leaves `{}`.
[[nodiscard]] absl::StatusOr<std::string> RemoveJsonMember(std::string_view file,
                                                           std::string_view text,
                                                           const std::vector<std::string>& path,
                                                           bool prune_parent);

}  // namespace abox::cli
