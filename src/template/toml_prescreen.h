// A pass over TOML text before toml++ 3.3.0 (Debian's) sees it, for the inputs that reach
// undefined behaviour in that version: a non-ASCII character where the parser looks for
// whitespace hits TOML_UNREACHABLE in is_non_ascii_horizontal_whitespace (upstream issues #190
// and #295, fixed after 3.3.0). That happens for such a character outside any string or comment
// (never valid TOML anyway) and right after a line-ending backslash in a multi-line basic string.
// Internal to src/template.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace abox::tmpl {

struct UnsafeTomlSpot {
  size_t line = 0;    // 1-based
  size_t column = 0;  // 1-based, in characters
  std::string why;
};

// The first spot in `text` that toml++ 3.3.0 cannot parse safely, nullopt when there is none.
// Strings and comments are tracked as TOML 1.0 defines them; after a syntax error the guess may
// be wrong, but toml++ stops at that error too.
[[nodiscard]] std::optional<UnsafeTomlSpot> FindUnsafeTomlSpot(std::string_view text);

}  // namespace abox::tmpl
