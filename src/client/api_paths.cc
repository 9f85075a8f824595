#include "src/client/api_paths.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace abox::client {

std::string UrlEscape(absl::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(byte) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    }
  }
  return out;
}

std::string WithQuery(absl::string_view path, const QueryParams& params) {
  std::string out(path);
  char sep = '?';
  for (const auto& [key, value] : params) {
    absl::StrAppend(&out, std::string(1, sep), UrlEscape(key), "=", UrlEscape(value));
    sep = '&';
  }
  return out;
}

std::string SandboxPath(absl::string_view sandbox, absl::string_view suffix) {
  return absl::StrCat("/v1/sandboxes/", UrlEscape(sandbox), suffix);
}

std::string ExecPath(absl::string_view sandbox, absl::string_view exec, absl::string_view suffix) {
  return absl::StrCat(SandboxPath(sandbox), "/execs/", UrlEscape(exec), suffix);
}

}  // namespace abox::client
