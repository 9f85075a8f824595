#include "src/workspace/paths.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace abox::workspace {

std::string EscapePath(absl::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

absl::Status ValidateRelativePath(absl::string_view path) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("refused path '", EscapePath(path.substr(0, 300)), "': ", why));
  };
  if (path.empty()) {
    return bad("empty");
  }
  if (path.size() > kMaxPathBytes) {
    return bad(absl::StrCat("longer than ", kMaxPathBytes, " bytes"));
  }
  if (path.front() == '/') {
    return bad("absolute paths are not allowed");
  }
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) {
      return bad("control characters (such as a newline) are not allowed in names");
    }
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty()) {
      return bad("empty component ('//' or a trailing '/')");
    }
    if (part == "." || part == "..") {
      return bad("'.' and '..' components are not allowed");
    }
    if (part.size() > kMaxComponentBytes) {
      return bad(absl::StrCat("a component is longer than ", kMaxComponentBytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

bool IsUnderGitDir(absl::string_view path) {
  return path == ".git" || absl::StartsWith(path, ".git/");
}

bool HasGitComponent(absl::string_view path) {
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (absl::EqualsIgnoreCase(part, ".git")) {
      return true;
    }
  }
  return false;
}

}  // namespace abox::workspace
