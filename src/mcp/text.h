// Text for a model: command output and file contents are bytes, JSON strings are UTF-8.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace abox::mcp {

// `bytes` with every byte that is not part of well-formed UTF-8 replaced by U+FFFD.
[[nodiscard]] std::string SanitizeUtf8(absl::string_view bytes);

// The last `max_bytes` of valid UTF-8 `text`, starting on a character boundary.
[[nodiscard]] std::string TailUtf8(const std::string& text, size_t max_bytes);
// The first `max_bytes` of valid UTF-8 `text`, ending on a character boundary.
[[nodiscard]] std::string HeadUtf8(const std::string& text, size_t max_bytes);

}  // namespace abox::mcp
