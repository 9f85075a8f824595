#include "src/template/template_values.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "src/template/project_template.h"

namespace abox::tmpl {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// Edit distance with adjacent swaps (optimal string alignment): insertions, deletions,
// substitutions and swaps of two neighbouring characters cost 1 each, so "setpu" is 1 from "setup".
size_t Distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) {
    d[i][0] = i;
  }
  for (size_t j = 0; j <= b.size(); ++j) {
    d[0][j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

const std::vector<std::string>& KnownPresets() {
  static const auto* presets = new std::vector<std::string>{
      "minimal", "developer", "python", "node", "go", "rust", "java", "full"};
  return *presets;
}

bool IsKnownPreset(std::string_view name) {
  const auto& presets = KnownPresets();
  return std::find(presets.begin(), presets.end(), name) != presets.end();
}

std::string Printable(std::string_view text, size_t max) {
  std::string out;
  for (char c : text.substr(0, max)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", u);
      out += buf;
    } else {
      out += c;
    }
  }
  if (text.size() > max) {
    out += "...";
  }
  return out;
}

std::string NearestName(std::string_view typed, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = 3;
  for (const std::string& candidate : candidates) {
    size_t d = Distance(absl::AsciiStrToLower(std::string(typed)), candidate);
    size_t longer = std::max(typed.size(), candidate.size());
    if (d < best_distance && d * 3 <= longer) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

std::optional<int64_t> ParseSizeMib(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[digits]))) {
    ++digits;
  }
  // Up to 9 digits: 999999999 TiB in MiB still fits an int64_t.
  if (digits == 0 || digits > 9) {
    return std::nullopt;
  }
  std::string_view unit = text.substr(digits);
  if (unit.starts_with(' ')) {
    unit.remove_prefix(1);
  }
  int64_t scale = 0;
  if (unit == "MiB") {
    scale = 1;
  } else if (unit == "GiB") {
    scale = 1024;
  } else if (unit == "TiB") {
    scale = 1024 * 1024;
  } else {
    return std::nullopt;
  }
  int64_t number = 0;
  if (!absl::SimpleAtoi(std::string(text.substr(0, digits)), &number)) {
    return std::nullopt;
  }
  return number * scale;
}

bool IsPackageName(std::string_view name) {
  if (name.size() < 2 || !IsLowerAlnum(name[0])) {
    return false;
  }
  return std::all_of(name.begin() + 1, name.end(),
                     [](char c) { return IsLowerAlnum(c) || c == '+' || c == '.' || c == '-'; });
}

bool IsImageName(std::string_view name) {
  if (name.empty() || name.size() > 64 || !IsLowerAlnum(name[0])) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsLowerAlnum(c) || c == '.' || c == '_' || c == '-'; });
}

bool IsPresetRule(std::string_view rule) {
  constexpr std::string_view kPrefix = "preset:";
  if (!rule.starts_with(kPrefix) || rule.size() == kPrefix.size()) {
    return false;
  }
  rule.remove_prefix(kPrefix.size());
  return std::all_of(rule.begin(), rule.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

bool IsOpenEgressRule(std::string_view rule) {
  std::string_view host = rule.substr(0, rule.find(':'));
  if (host == "*") {
    return true;
  }
  // "*.com": every name below a top-level domain is as good as open.
  return host.starts_with("*.") && host.find('.', 2) == std::string_view::npos;
}

}  // namespace abox::tmpl
