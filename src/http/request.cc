#include "src/http/request.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/status_macros.h"

namespace abox::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  c = absl::ascii_tolower(c);
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  return -1;
}

}  // namespace

std::optional<std::string> Request::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) {
      return value;
    }
  }
  return std::nullopt;
}

const std::string& Request::Param(absl::string_view name) const {
  static const std::string empty_param;
  for (const auto& [key, value] : params) {
    if (key == name) {
      return value;
    }
  }
  return empty_param;
}

std::optional<std::string> Request::Query(absl::string_view name) const {
  for (const auto& [key, value] : query) {
    if (key == name) {
      return value;
    }
  }
  return std::nullopt;
}

std::vector<std::string> Request::QueryAll(absl::string_view name) const {
  std::vector<std::string> values;
  for (const auto& [key, value] : query) {
    if (key == name) {
      values.push_back(value);
    }
  }
  return values;
}

absl::StatusOr<std::string> PercentDecode(absl::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else if (c == '%') {
      int hi = i + 2 < s.size() ? HexValue(s[i + 1]) : -1;
      int lo = i + 2 < s.size() ? HexValue(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad percent-escape in \"", s, "\": use %XX with two hex digits"));
      }
      char decoded = static_cast<char>(hi * 16 + lo);
      if (decoded == '\0') {
        return absl::InvalidArgumentError(absl::StrCat("\"", s, "\" decodes to a NUL byte"));
      }
      out.push_back(decoded);
      i += 2;
    } else if (c == '\0') {
      return absl::InvalidArgumentError("a NUL byte in the request target");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

absl::Status SplitTarget(absl::string_view target, std::string* path,
                         std::vector<std::pair<std::string, std::string>>* query) {
  if (target.empty() || target.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("request target \"", target, "\" must be a path starting with '/'"));
  }
  size_t q = target.find('?');
  *path = std::string(target.substr(0, q));
  query->clear();
  if (q == absl::string_view::npos) {
    return absl::OkStatus();
  }
  absl::string_view raw_query = target.substr(q + 1);
  size_t hash = raw_query.find('#');
  raw_query = raw_query.substr(0, hash);
  for (absl::string_view part : absl::StrSplit(raw_query, '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    ABOX_ASSIGN_OR_RETURN(std::string key, PercentDecode(kv.first, true));
    ABOX_ASSIGN_OR_RETURN(std::string value, PercentDecode(kv.second, true));
    query->emplace_back(std::move(key), std::move(value));
  }
  return absl::OkStatus();
}

}  // namespace abox::http
