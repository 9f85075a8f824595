// UTF-8 validity, for choosing between JSON text and base64 for bytes from a command.
#pragma once

#include "absl/strings/string_view.h"

namespace abox::base {

// True when `text` is well-formed UTF-8: no overlong forms, no UTF-16 surrogates, nothing past
// U+10FFFF, no truncated sequence.
[[nodiscard]] bool IsValidUtf8(absl::string_view text);

}  // namespace abox::base
