#include "src/net/host_name.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace abox::net {
namespace {

absl::Status Bad(absl::string_view name, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("'", QuoteForLog(name), "' is not a valid host name: ", why));
}

}  // namespace

absl::StatusOr<std::string> NormalizeHostName(absl::string_view name) {
  absl::string_view original = name;
  if (absl::EndsWith(name, ".")) {
    name.remove_suffix(1);
  }
  if (name.empty()) {
    return Bad(original, "it is empty");
  }
  if (name.size() > kMaxHostNameLength) {
    return Bad(original, absl::StrCat("it is longer than ", kMaxHostNameLength, " characters"));
  }
  for (char c : name) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      return Bad(original, "it is not ASCII (IDNA is not supported: use the xn-- form)");
    }
  }
  std::string lower = absl::AsciiStrToLower(name);
  absl::string_view last;
  for (absl::string_view label : absl::StrSplit(lower, '.')) {
    if (label.empty()) {
      return Bad(original, "it has an empty label");
    }
    if (label.size() > kMaxLabelLength) {
      return Bad(original, absl::StrCat("a label is longer than ", kMaxLabelLength, " characters"));
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') {
        return Bad(original, "only letters, digits, '-' and '.' are allowed");
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return Bad(original, "a label starts or ends with '-'");
    }
    last = label;
  }
  if (!absl::ascii_isalpha(static_cast<unsigned char>(last.front()))) {
    return Bad(original,
               "the last label starts with a digit (IP addresses are not host names here)");
  }
  return lower;
}

bool IsSubdomainOrSelf(absl::string_view name, absl::string_view suffix) {
  if (name.size() == suffix.size()) {
    return name == suffix;
  }
  return name.size() > suffix.size() && absl::EndsWith(name, suffix) &&
         name[name.size() - suffix.size() - 1] == '.';
}

std::string QuoteForLog(absl::string_view text, size_t max) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    }
  }
  if (text.size() > max) {
    out += "...";
  }
  return out;
}

}  // namespace abox::net
