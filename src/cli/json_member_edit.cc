#include "src/cli/json_member_edit.h"

#include <cstddef>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace abox::cli {
namespace {

using nlohmann::ordered_json;

bool IsBlank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

int LineAt(std::string_view text, size_t pos) {
  int line = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    line += text[i] == '\n' ? 1 : 0;
  }
  return line;
}

// The offset of the first // or /* outside a string, if any.
std::optional<size_t> FindComment(std::string_view text) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '/' && i + 1 < text.size() && (text[i + 1] == '/' || text[i + 1] == '*')) {
      return i;
    }
  }
  return std::nullopt;
}

// Records the first parse error; accepts everything else.
class ErrorSax final : public nlohmann::json_sax<ordered_json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    message_ = ex.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." -> from "parse".
    if (size_t p = message_.find("] "); p != std::string::npos) {
      message_ = message_.substr(p + 2);
    }
    return false;
  }
  [[nodiscard]] const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// A scanner over text that ParseUserJson accepted: it only finds where things are.
size_t SkipWs(std::string_view t, size_t p) {
  while (p < t.size() && (t[p] == ' ' || t[p] == '\t' || t[p] == '\n' || t[p] == '\r')) {
    ++p;
  }
  return p;
}

size_t SkipString(std::string_view t, size_t p) {
  for (++p; p < t.size(); ++p) {
    if (t[p] == '\\') {
      ++p;
    } else if (t[p] == '"') {
      return p + 1;
    }
  }
  return t.size();
}

size_t SkipValue(std::string_view t, size_t p) {
  if (p >= t.size()) {
    return p;
  }
  if (t[p] == '"') {
    return SkipString(t, p);
  }
  if (t[p] == '{' || t[p] == '[') {
    int depth = 0;
    while (p < t.size()) {
      char c = t[p];
      if (c == '"') {
        p = SkipString(t, p);
        continue;
      }
      if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        return p + 1;
      }
      ++p;
    }
    return p;
  }
  while (p < t.size() && std::string_view(",}] \t\r\n").find(t[p]) == std::string_view::npos) {
    ++p;
  }
  return p;
}

struct Member {
  std::string key;
  size_t key_begin = 0;
  size_t value_begin = 0;
  size_t value_end = 0;
};

struct Object {
  size_t open = 0;   // the '{'
  size_t close = 0;  // the '}'
  std::vector<Member> members;

  // The last member named `key` (the one a JSON reader keeps), or -1.
  [[nodiscard]] int Find(const std::string& key) const {
    for (int i = static_cast<int>(members.size()) - 1; i >= 0; --i) {
      if (members[i].key == key) {
        return i;
      }
    }
    return -1;
  }
};

Object ReadObject(std::string_view t, size_t p) {
  Object o{.open = p};
  p = SkipWs(t, p + 1);
  while (p < t.size() && t[p] != '}') {
    if (t[p] == ',') {
      p = SkipWs(t, p + 1);
      continue;
    }
    Member m;
    m.key_begin = p;
    size_t key_end = SkipString(t, p);
    ordered_json key = ordered_json::parse(t.substr(p, key_end - p), nullptr, false);
    m.key = key.is_string() ? key.get<std::string>() : "";
    p = SkipWs(t, SkipWs(t, key_end) + 1);  // past ':'
    m.value_begin = p;
    m.value_end = SkipValue(t, p);
    p = SkipWs(t, m.value_end);
    o.members.push_back(std::move(m));
  }
  o.close = p;
  return o;
}

// The whitespace that starts the line holding `pos`.
std::string LineIndent(std::string_view t, size_t pos) {
  size_t start = t.rfind('\n', pos);
  start = start == std::string_view::npos ? 0 : start + 1;
  size_t end = start;
  while (end < t.size() && (t[end] == ' ' || t[end] == '\t')) {
    ++end;
  }
  return std::string(t.substr(start, end - start));
}

// One level of indentation as the file has it: the root's first member's, else two spaces.
std::string IndentUnit(std::string_view t) {
  size_t root = SkipWs(t, 0);
  if (root < t.size() && t[root] == '{') {
    Object o = ReadObject(t, root);
    if (!o.members.empty()) {
      std::string_view ws = t.substr(o.open + 1, o.members[0].key_begin - o.open - 1);
      if (size_t nl = ws.rfind('\n'); nl != std::string_view::npos && nl + 1 < ws.size()) {
        return std::string(ws.substr(nl + 1));
      }
    }
  }
  return "  ";
}

// `value` as it goes after a member's key on a line indented by `indent`.
std::string Serialize(const ordered_json& value, const std::string& indent, const std::string& unit,
                      bool multiline) {
  if (!multiline) {
    return value.dump();
  }
  bool tabs = !unit.empty() && unit[0] == '\t';
  std::string text = value.dump(static_cast<int>(unit.size()), tabs ? '\t' : ' ');
  return absl::StrReplaceAll(text, {{"\n", absl::StrCat("\n", indent)}});
}

void InsertMember(std::string& out, const Object& o, const std::string& key,
                  const ordered_json& value, const std::string& unit) {
  std::string key_json = ordered_json(key).dump();
  if (!o.members.empty()) {
    std::string_view ws =
        std::string_view(out).substr(o.open + 1, o.members[0].key_begin - o.open - 1);
    std::string insert;
    if (size_t nl = ws.rfind('\n'); nl != std::string_view::npos) {
      std::string indent(ws.substr(nl + 1));
      insert = absl::StrCat(",\n", indent, key_json, ": ", Serialize(value, indent, unit, true));
    } else {
      insert = absl::StrCat(", ", key_json, ": ", value.dump());
    }
    out.insert(o.members.back().value_end, insert);
    return;
  }
  std::string base = LineIndent(out, o.open);
  std::string indent = base + unit;
  out.replace(
      o.open + 1, o.close - o.open - 1,
      absl::StrCat("\n", indent, key_json, ": ", Serialize(value, indent, unit, true), "\n", base));
}

void RemoveMemberAt(std::string& out, const Object& o, size_t k) {
  if (o.members.size() == 1) {
    out.erase(o.open + 1, o.close - o.open - 1);
  } else if (k > 0) {
    out.erase(o.members[k - 1].value_end, o.members[k].value_end - o.members[k - 1].value_end);
  } else {
    out.erase(o.members[0].key_begin, o.members[1].key_begin - o.members[0].key_begin);
  }
}

std::string PathName(const std::vector<std::string>& path, size_t n) {
  return absl::StrJoin(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(n), ".");
}

}  // namespace

absl::StatusOr<ordered_json> ParseUserJson(std::string_view file, std::string_view text) {
  if (IsBlank(text)) {
    return ordered_json::object();
  }
  if (std::optional<size_t> comment = FindComment(text)) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(file), " has a comment at line ", LineAt(text, *comment),
        "; abox edits only plain JSON and would not drop your comments: remove them (or add the "
        "abox entry by hand), then run this again. Nothing was written"));
  }
  ErrorSax sax;
  if (!ordered_json::sax_parse(text, &sax, ordered_json::input_format_t::json,
                               /*strict=*/true, /*ignore_comments=*/false)) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(file), " is not valid JSON (",
                                                   sax.message(),
                                                   "); fix it or move it away, then run this "
                                                   "again. Nothing was written"));
  }
  ordered_json parsed = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(file),
                     " holds JSON that is not an object ({...}); fix it or move it away, "
                     "then run this again. Nothing was written"));
  }
  return parsed;
}

absl::StatusOr<std::string> SetJsonMember(std::string_view file, std::string_view text,
                                          const std::vector<std::string>& path,
                                          const ordered_json& value) {
  absl::StatusOr<ordered_json> parsed = ParseUserJson(file, text);
  if (!parsed.ok()) {
    return parsed.status();
  }
  std::string out = IsBlank(text) ? "{}\n" : std::string(text);
  std::string unit = IndentUnit(out);
  size_t pos = SkipWs(out, 0);
  for (size_t i = 0; i < path.size(); ++i) {
    Object o = ReadObject(out, pos);
    int k = o.Find(path[i]);
    if (k < 0) {
      ordered_json nested = value;
      for (size_t j = path.size() - 1; j > i; --j) {
        nested = ordered_json{{path[j], std::move(nested)}};
      }
      InsertMember(out, o, path[i], nested, unit);
      return out;
    }
    const Member& m = o.members[k];
    if (i + 1 == path.size()) {
      bool multiline = out.substr(o.open, m.key_begin - o.open).find('\n') != std::string::npos;
      out.replace(m.value_begin, m.value_end - m.value_begin,
                  Serialize(value, LineIndent(out, m.key_begin), unit, multiline));
      return out;
    }
    if (out[m.value_begin] != '{') {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(file), ": ", PathName(path, i + 1),
                       " is not an object; fix it or move the file away, then run this again. "
                       "Nothing was written"));
    }
    pos = m.value_begin;
  }
  return out;
}

absl::StatusOr<std::string> RemoveJsonMember(std::string_view file, std::string_view text,
                                             const std::vector<std::string>& path,
                                             bool prune_parent) {
  absl::StatusOr<ordered_json> parsed = ParseUserJson(file, text);
  if (!parsed.ok()) {
    return parsed.status();
  }
  if (IsBlank(text) || path.empty()) {
    return std::string(text);
  }
  std::string out(text);
  std::vector<std::pair<Object, int>> chain;
  size_t pos = SkipWs(out, 0);
  for (size_t i = 0; i < path.size(); ++i) {
    Object o = ReadObject(out, pos);
    int k = o.Find(path[i]);
    if (k < 0) {
      return out;
    }
    pos = o.members[k].value_begin;
    chain.emplace_back(std::move(o), k);
    if (i + 1 < path.size() && out[pos] != '{') {
      return out;
    }
  }
  size_t level = chain.size() - 1;
  if (prune_parent && level > 0 && chain[level].first.members.size() == 1) {
    --level;
  }
  RemoveMemberAt(out, chain[level].first, static_cast<size_t>(chain[level].second));
  return out;
}

}  // namespace abox::cli
