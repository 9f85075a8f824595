#include "src/template/toml_prescreen.h"

#include <algorithm>
#include <vector>

namespace abox::tmpl {
namespace {

bool IsNonAscii(char c) { return static_cast<unsigned char>(c) >= 0x80; }

bool IsBareKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// What ends a bare value for toml++ (is_value_terminator, ASCII part).
bool IsValueTerminator(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ',' || c == ']' || c == '}' ||
         c == '#';
}

bool IsSpaceOrNewline(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Follows TOML 1.0's structure as far as it decides where strings and comments are: keys and
// values, arrays, inline tables and table headers. A bare value (a number, date, boolean) is
// one run up to a value terminator, quotes included, because toml++ scans it that way.
class Scanner final {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  std::optional<UnsafeTomlSpot> Scan() {
    while (i_ < text_.size()) {
      char c = text_[i_];
      if (IsNonAscii(c)) {
        return Spot(i_,
                    "a character outside ASCII outside a string or comment; TOML allows "
                    "them only inside strings and comments");
      }
      if (c == '\n') {
        NewLine(i_);
        if (stack_.empty()) {
          expect_value_ = false;  // a new key-value pair or header
        }
        ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else if (c == '#') {
        while (i_ < text_.size() && text_[i_] != '\n') {
          ++i_;  // comments may hold anything but control characters
        }
      } else if (c == '"' || c == '\'') {
        if (std::optional<UnsafeTomlSpot> spot = String(c)) {
          return spot;
        }
        expect_value_ = false;
      } else if (c == '=') {
        expect_value_ = true;
        ++i_;
      } else if (c == '[') {
        stack_.push_back(expect_value_ ? '[' : 'h');  // an array, or a table header
        ++i_;
      } else if (c == '{') {
        stack_.push_back('{');
        expect_value_ = false;
        ++i_;
      } else if (c == ']' || c == '}') {
        if (!stack_.empty()) {
          stack_.pop_back();
        }
        expect_value_ = false;
        ++i_;
      } else if (c == ',') {
        expect_value_ = !stack_.empty() && stack_.back() == '[';
        ++i_;
      } else if (expect_value_) {
        while (i_ < text_.size() && !IsValueTerminator(text_[i_])) {
          if (IsNonAscii(text_[i_])) {
            return Spot(i_,
                        "a character outside ASCII in a value that is not a string; put text "
                        "in quotes");
          }
          ++i_;
        }
        expect_value_ = false;
      } else if (IsBareKeyChar(c)) {
        while (i_ < text_.size() && IsBareKeyChar(text_[i_])) {
          ++i_;
        }
      } else {
        ++i_;  // '.', or a mistake toml++ reports
      }
    }
    return std::nullopt;
  }

 private:
  void NewLine(size_t at) {
    ++line_;
    line_start_ = at + 1;
  }

  UnsafeTomlSpot Spot(size_t at, const char* why) const {
    size_t column = 1;
    for (size_t k = line_start_; k < at; ++k) {
      column += (static_cast<unsigned char>(text_[k]) & 0xC0) != 0x80 ? 1 : 0;
    }
    return UnsafeTomlSpot{line_, column, why};
  }

  size_t RunOf(size_t at, char c) const {
    size_t n = 0;
    while (at + n < text_.size() && text_[at + n] == c) {
      ++n;
    }
    return n;
  }

  // A string starting at i_ with `quote`; leaves i_ after it (or at the end of the text).
  std::optional<UnsafeTomlSpot> String(char quote) {
    bool multi = RunOf(i_, quote) >= 3;
    bool basic = quote == '"';
    i_ += multi ? 3 : 1;
    while (i_ < text_.size()) {
      char c = text_[i_];
      if (c == '\n') {
        if (!multi) {
          return std::nullopt;  // toml++ stops at this error
        }
        NewLine(i_);
        ++i_;
      } else if (basic && c == '\\') {
        if (std::optional<UnsafeTomlSpot> spot = Escape(multi)) {
          return spot;
        }
      } else if (c == quote) {
        size_t run = multi ? RunOf(i_, quote) : 1;
        if (!multi) {
          ++i_;
          return std::nullopt;
        }
        // Up to two quotes before the closing three belong to the string.
        i_ += std::min<size_t>(run, 5);
        if (run >= 3) {
          return std::nullopt;
        }
      } else {
        ++i_;
      }
    }
    return std::nullopt;
  }

  // A backslash at i_ in a basic string.
  std::optional<UnsafeTomlSpot> Escape(bool multi) {
    size_t j = i_ + 1;
    if (multi && j < text_.size() && IsSpaceOrNewline(text_[j])) {
      // A line-ending backslash: toml++ skips the whitespace and newlines after it, asking
      // is_whitespace() about the first other character.
      while (j < text_.size() && IsSpaceOrNewline(text_[j])) {
        if (text_[j] == '\n') {
          NewLine(j);
        }
        ++j;
      }
      if (j < text_.size() && IsNonAscii(text_[j])) {
        return Spot(j,
                    "a character outside ASCII right after a line-ending backslash in a "
                    "multi-line string, which this TOML parser cannot read safely; start the "
                    "line with an ASCII character or a \\u escape");
      }
      i_ = j;
      return std::nullopt;
    }
    if (multi && j < text_.size() && IsNonAscii(text_[j])) {
      // Not an escape; toml++ asks is_whitespace() about the character before saying so.
      return Spot(j,
                  "a backslash before a character outside ASCII in a multi-line string, "
                  "which is no escape; remove the backslash or double it");
    }
    i_ = std::min(j + 1, text_.size());  // \" \\ \n \uXXXX...: the rest is ordinary text
    return std::nullopt;
  }

  std::string_view text_;
  size_t i_ = 0;
  size_t line_ = 1;
  size_t line_start_ = 0;
  // In key position unless just after '=' or inside an array.
  bool expect_value_ = false;
  // Open brackets: '[' an array, 'h' a table header, '{' an inline table.
  std::vector<char> stack_;
};

}  // namespace

std::optional<UnsafeTomlSpot> FindUnsafeTomlSpot(std::string_view text) {
  return Scanner(text).Scan();
}

}  // namespace abox::tmpl
