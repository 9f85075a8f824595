#include "src/cli/flags.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace abox::cli {

absl::StatusOr<int64_t> ParseDurationSeconds(std::string_view flag, std::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(flag), ": '", std::string(text),
        "' is not a duration; use a number with a unit: 30s, 10m, 2h, 1d (or 0 for never)"));
  };
  std::string rest = std::string(absl::StripAsciiWhitespace(std::string(text)));
  if (rest.empty()) {
    return bad();
  }
  if (rest == "0") {
    return 0;
  }
  // absl::ParseDuration knows h, m, s, ms, us, ns; days come first in front of it ("1d12h").
  absl::Duration total = absl::ZeroDuration();
  size_t digits = 0;
  while (digits < rest.size() && absl::ascii_isdigit(static_cast<unsigned char>(rest[digits]))) {
    ++digits;
  }
  if (digits > 0 && digits < rest.size() && rest[digits] == 'd') {
    int64_t days = 0;
    if (!absl::SimpleAtoi(rest.substr(0, digits), &days) || days > 365 * 100) {
      return bad();
    }
    total = absl::Hours(24 * days);
    rest = rest.substr(digits + 1);
  }
  if (!rest.empty()) {
    absl::Duration d;
    if (rest[0] == '-' || rest[0] == '+' || !absl::ParseDuration(rest, &d) ||
        d == absl::InfiniteDuration()) {
      return bad();
    }
    total += d;
  }
  if (total < absl::ZeroDuration()) {
    return bad();
  }
  return absl::ToInt64Seconds(absl::Ceil(total, absl::Seconds(1)));
}

absl::StatusOr<int64_t> ParseSizeMib(std::string_view flag_text, std::string_view text_in) {
  const absl::string_view flag(flag_text.data(), flag_text.size());
  const absl::string_view text(text_in.data(), text_in.size());
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " expects a size such as 32G, 500M or a number of MiB, got '", text, "'"));
  };
  absl::string_view digits = text;
  size_t n = 0;
  while (n < digits.size() && absl::ascii_isdigit(static_cast<unsigned char>(digits[n]))) {
    ++n;
  }
  absl::string_view unit = digits.substr(n);
  digits = digits.substr(0, n);
  uint64_t value = 0;
  if (digits.empty() || digits.size() > 9 || !absl::SimpleAtoi(digits, &value)) {
    return bad();
  }
  std::string u = absl::AsciiStrToUpper(unit);
  uint64_t scale = 0;
  if (u == "MB" || u == "GB" || u == "TB") {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " '", text, "': ", unit, " is ambiguous (1000 or 1024?); write 32G or 32GiB"));
  }
  if (u.empty() || u == "M" || u == "MIB") {
    scale = 1;
  } else if (u == "G" || u == "GIB") {
    scale = 1024;
  } else if (u == "T" || u == "TIB") {
    scale = 1024 * 1024;
  } else {
    return bad();
  }
  return static_cast<int64_t>(value * scale);
}

absl::StatusOr<std::map<std::string, std::string>> ParseKeyValues(
    std::string_view flag, std::string_view what, const std::vector<std::string>& items) {
  std::map<std::string, std::string> out;
  for (const std::string& item : items) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(flag), " expects ", std::string(what), ", got '", item, "'"));
    }
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

std::string FormatAge(absl::Duration d) {
  if (d < absl::ZeroDuration()) {
    d = absl::ZeroDuration();
  }
  int64_t s = absl::ToInt64Seconds(d);
  if (s < 60) {
    return absl::StrCat(s, "s");
  }
  if (s < 3600) {
    return absl::StrCat(s / 60, "m");
  }
  if (s < 86400) {
    return absl::StrCat(s / 3600, "h");
  }
  return absl::StrCat(s / 86400, "d");
}

std::string ShellJoin(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) {
    if (!out.empty()) {
      out += ' ';
    }
    bool plain = !arg.empty();
    for (char c : arg) {
      auto u = static_cast<unsigned char>(c);
      if (!(absl::ascii_isalnum(u) || u >= 0x80 ||
            std::string_view("-_./=:,+@%").find(c) != std::string_view::npos)) {
        plain = false;
        break;
      }
    }
    if (plain) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char c : arg) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

std::string LastLines(std::string_view text, int n) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') {
    --pos;
  }
  for (int i = 0; i < n; ++i) {
    size_t nl = pos == 0 ? std::string_view::npos : text.rfind('\n', pos - 1);
    if (nl == std::string_view::npos) {
      return std::string(text);
    }
    pos = nl;
  }
  return std::string(text.substr(pos + 1));
}

}  // namespace abox::cli
