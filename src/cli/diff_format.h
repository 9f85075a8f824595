// How `abox diff` shows the API's diff answer (GET /v1/sandboxes/{id}/diff) to a person: pure
// functions over the decoded answer (api::Diff). The answer's patches are the guest's bytes: on a
// terminal their control characters are rendered visibly (terminal_text.h), and every file that
// holds one is flagged, so that an escape sequence in a patch cannot hide lines of the review apply
// follows.
#pragma once

#include <string>
#include <vector>

#include "src/api/workspace.h"

namespace abox::cli {

// Sets control_characters on each of the answer's files: whether its path or patch holds a
// control character (HasControlCharacters). Returns the paths of those that do.
std::vector<std::string> MarkControlCharacters(api::Diff& diff);

// What `abox diff` prints on stdout for an answer that MarkControlCharacters() marked: the
// patches (`stat` false) or a line per file with its changed lines, flagged "[control
// characters]" when it holds any (`stat` true), then the files that make code run elsewhere,
// apart. With `terminal`, control characters are rendered visibly; without, patches stay byte
// for byte as the sandbox has them (so that they apply).
[[nodiscard]] std::string FormatDiff(const api::Diff& diff, bool stat, bool terminal);

}  // namespace abox::cli
