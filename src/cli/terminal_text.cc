#include "src/cli/terminal_text.h"

#include <unistd.h>

#include "absl/strings/str_format.h"
#include "src/base/utf8.h"

namespace abox::cli {
namespace {

enum class Piece {
  kText,        // shown as it is
  kControl,     // a C0 control (not tab or newline), DEL, or a lone byte 0x80-0x9f
  kUtf8Control  // U+0080-U+009F in UTF-8 (two bytes: 0xc2 0x80-0x9f)
};

// The length of the well-formed UTF-8 sequence of two or more bytes at text[i]; 0 when none
// starts there.
size_t SequenceLength(std::string_view text, size_t i) {
  auto lead = static_cast<unsigned char>(text[i]);
  size_t n = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
  if (n == 0 || i + n > text.size()) {
    return 0;
  }
  return base::IsValidUtf8(absl::string_view(text.data() + i, n)) ? n : 0;
}

// Calls fn(piece, bytes) for consecutive pieces of `text`.
template <typename Fn>
void Walk(std::string_view text, Fn fn) {
  size_t plain_start = 0;
  size_t i = 0;
  auto flush = [&] {
    if (i > plain_start) {
      fn(Piece::kText, text.substr(plain_start, i - plain_start));
    }
  };
  while (i < text.size()) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      if ((b < 0x20 && b != '\t' && b != '\n') || b == 0x7f) {
        flush();
        fn(Piece::kControl, text.substr(i, 1));
        plain_start = ++i;
      } else {
        ++i;
      }
      continue;
    }
    size_t n = SequenceLength(text, i);
    if (n == 2 && b == 0xc2 && static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      flush();
      fn(Piece::kUtf8Control, text.substr(i, 2));
      plain_start = i += 2;
    } else if (n == 0 && b <= 0x9f) {  // a lone C1 byte: CSI and friends on an 8-bit terminal
      flush();
      fn(Piece::kControl, text.substr(i, 1));
      plain_start = ++i;
    } else {
      i += n == 0 ? 1 : n;  // other UTF-8, or another stray byte (no terminal acts on it)
    }
  }
  flush();
}

std::string Render(std::string_view text, bool json) {
  std::string out;
  out.reserve(text.size());
  Walk(text, [&](Piece piece, std::string_view bytes) {
    switch (piece) {
      case Piece::kText:
        out.append(bytes);
        break;
      case Piece::kControl:
        if (json) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(bytes[0]));
        } else {
          absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(bytes[0]));
        }
        break;
      case Piece::kUtf8Control:
        absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(bytes[1]));
        break;
    }
  });
  return out;
}

}  // namespace

bool HasControlCharacters(std::string_view text) {
  bool found = false;
  Walk(text, [&](Piece piece, std::string_view) { found = found || piece != Piece::kText; });
  return found;
}

std::string ShowControlCharacters(std::string_view text) { return Render(text, false); }

std::string ShowControlCharactersInJson(std::string_view json) { return Render(json, true); }

bool IsTerminal(std::FILE* stream) { return ::isatty(::fileno(stream)) != 0; }

std::string ForTerminal(std::FILE* stream, std::string text) {
  return IsTerminal(stream) ? ShowControlCharacters(text) : std::move(text);
}

std::string JsonForTerminal(std::FILE* stream, std::string json) {
  return IsTerminal(stream) ? ShowControlCharactersInJson(json) : std::move(json);
}

}  // namespace abox::cli
