// Text from the guest (or anything it can influence) made safe to show on a terminal.
//
// A terminal acts on control characters instead of showing them: "\x1b[2K\r" erases the line it
// is on, a carriage return lets the next bytes overwrite it, and a C1 CSI (U+009B, or the byte
// 0x9b on an 8-bit terminal) starts an escape sequence. In `abox diff`, the review that gates
// `abox apply`, that would let the agent hide lines. So wherever abox shows such text to a person
// it renders these characters visibly, and only when the stream is a terminal: piped output stays
// byte for byte (`abox diff ID > patch` still applies).
//
// The rendering: every C0 control character except tab and newline, DEL, and a byte 0x80-0x9f
// that is not part of a UTF-8 sequence become `\xHH` (two lowercase hex digits, e.g. `\x1b`,
// `\x0d`, `\x7f`, `\x9b`); a C1 control character written in UTF-8 (U+0080-U+009F) becomes
// `\u00HH` (e.g. `\u009b`). Everything else, other UTF-8 and other bytes included, is unchanged.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace abox::cli {

// Whether `text` holds a control character that ShowControlCharacters() would render.
[[nodiscard]] bool HasControlCharacters(std::string_view text);

// `text` with each control character rendered visibly, as described above.
[[nodiscard]] std::string ShowControlCharacters(std::string_view text);

// JSON text with each control character rendered as a JSON escape (`\u00HH`), so that it stays
// valid JSON with the same meaning (raw control characters can only be inside its strings).
[[nodiscard]] std::string ShowControlCharactersInJson(std::string_view json);

// Whether `stream` is a terminal.
[[nodiscard]] bool IsTerminal(std::FILE* stream);

// `text` as it should be written to `stream`: ShowControlCharacters() when it is a terminal,
// unchanged otherwise. JsonForTerminal: the same with ShowControlCharactersInJson().
[[nodiscard]] std::string ForTerminal(std::FILE* stream, std::string text);
[[nodiscard]] std::string JsonForTerminal(std::FILE* stream, std::string json);

}  // namespace abox::cli
