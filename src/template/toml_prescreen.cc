#include "src/template/toml_prescreen.h"

#include <algorithm>

namespace abox::tmpl {
namespace {

enum class State { kNormal, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral };

bool IsNonAscii(char c) { return static_cast<unsigned char>(c) >= 0x80; }

size_t RunOf(std::string_view text, size_t i, char c) {
  size_t n = 0;
  while (i + n < text.size() && text[i + n] == c) {
    ++n;
  }
  return n;
}

}  // namespace

std::optional<UnsafeTomlSpot> FindUnsafeTomlSpot(std::string_view text) {
  State state = State::kNormal;
  // In kNormal: inside a run of characters that does not start with a quote, [ or {.
  bool run_started = false;
  size_t line = 1;
  size_t line_start = 0;
  auto spot = [&](size_t i, const char* why) {
    size_t column = 1;
    for (size_t k = line_start; k < i; ++k) {
      column += (static_cast<unsigned char>(text[k]) & 0xC0) != 0x80 ? 1 : 0;
    }
    return UnsafeTomlSpot{line, column, why};
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
      if (state == State::kComment) {
        state = State::kNormal;
      }
      run_started = false;
      continue;
    }
    switch (state) {
      case State::kNormal:
        if (IsNonAscii(c)) {
          return spot(i, run_started
                             ? "a character outside ASCII outside a string or comment (a quote "
                               "right after other characters does not start a string here: put "
                               "a space before it)"
                             : "a character outside ASCII outside a string or comment; TOML "
                               "allows them only inside strings and comments");
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == ',' || c == ']' || c == '}') {
          run_started = false;
        } else if (c == '#') {
          state = State::kComment;
          run_started = false;
        } else if (!run_started && (c == '"' || c == '\'')) {
          bool multi = RunOf(text, i, c) >= 3;
          state = c == '"' ? (multi ? State::kMultiBasic : State::kBasic)
                           : (multi ? State::kMultiLiteral : State::kLiteral);
          i += multi ? 2 : 0;
        } else if (!run_started && (c == '[' || c == '{')) {
          // An array, inline table or table header: what follows starts afresh.
        } else {
          // toml++ scans a bare value up to whitespace, ',', ']', '}' or '#' whatever it holds,
          // quotes included: a quote inside such a run starts no string for it.
          run_started = true;
        }
        break;
      case State::kComment:
        break;
      case State::kBasic:
        if (c == '\\') {
          ++i;  // the escaped character (a newline here is an error toml++ reports)
        } else if (c == '"') {
          state = State::kNormal;
        }
        break;
      case State::kLiteral:
        if (c == '\'') {
          state = State::kNormal;
        }
        break;
      case State::kMultiBasic:
      case State::kMultiLiteral: {
        char quote = state == State::kMultiBasic ? '"' : '\'';
        if (state == State::kMultiBasic && c == '\\') {
          size_t j = i + 1;
          if (j < text.size() &&
              (text[j] == ' ' || text[j] == '\t' || text[j] == '\r' || text[j] == '\n')) {
            // A line-ending backslash: toml++ skips the whitespace and newlines after it.
            while (j < text.size() &&
                   (text[j] == ' ' || text[j] == '\t' || text[j] == '\r' || text[j] == '\n')) {
              if (text[j] == '\n') {
                ++line;
                line_start = j + 1;
              }
              ++j;
            }
            if (j < text.size() && IsNonAscii(text[j])) {
              return spot(j,
                          "a character outside ASCII right after a line-ending backslash in a "
                          "multi-line string, which this TOML parser cannot read safely; "
                          "start the line with an ASCII character or a \\u escape");
            }
            i = j - 1;
          } else if (j < text.size() && IsNonAscii(text[j])) {
            // Not an escape; toml++ asks is_whitespace() about the character before saying so.
            return spot(j,
                        "a backslash before a character outside ASCII in a multi-line "
                        "string, which is no escape; remove the backslash or double it");
          } else {
            ++i;  // an escape such as \" or \\ (a newline cannot follow: handled above)
          }
        } else if (c == quote) {
          // Up to two quotes before the closing three belong to the string.
          size_t run = RunOf(text, i, quote);
          if (run >= 3) {
            state = State::kNormal;
            i += std::min<size_t>(run, 5) - 1;
          } else {
            i += run - 1;
          }
        }
        break;
      }
    }
  }
  return std::nullopt;
}

}  // namespace abox::tmpl
