#include "src/cli/text_block_edit.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace abox::cli {
namespace {

std::string_view TrimLeft(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string_view() : s.substr(b);
}

std::string_view Trim(std::string_view s) {
  s = TrimLeft(s);
  size_t e = s.find_last_not_of(" \t\r\n");
  return e == std::string_view::npos ? s : s.substr(0, e + 1);
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  return lines;
}

enum class LineKind { kBlank, kComment, kHeader, kOther };

struct Line {
  size_t begin = 0;
  size_t end = 0;  // after its '\n' (or the end of the text)
  LineKind kind = LineKind::kOther;
  std::vector<std::string> header;  // the table's keys, for a header
};

// The keys of a table header ("[a.b]", "[[a . 'b']]"), or nullopt if `line` is not one.
std::optional<std::vector<std::string>> HeaderKeys(std::string_view line) {
  line = Trim(line);
  bool array = line.starts_with("[[");
  size_t p = array ? 2 : 1;
  std::vector<std::string> keys;
  for (;;) {
    while (p < line.size() && (line[p] == ' ' || line[p] == '\t')) {
      ++p;
    }
    if (p >= line.size()) {
      return std::nullopt;
    }
    std::string key;
    if (line[p] == '"' || line[p] == '\'') {
      char quote = line[p++];
      while (p < line.size() && line[p] != quote) {
        if (quote == '"' && line[p] == '\\' && p + 1 < line.size()) {
          ++p;
        }
        key += line[p++];
      }
      if (p >= line.size()) {
        return std::nullopt;
      }
      ++p;
    } else {
      while (p < line.size() &&
             (absl::ascii_isalnum(line[p]) || line[p] == '_' || line[p] == '-')) {
        key += line[p++];
      }
      if (key.empty()) {
        return std::nullopt;
      }
    }
    keys.push_back(std::move(key));
    while (p < line.size() && (line[p] == ' ' || line[p] == '\t')) {
      ++p;
    }
    if (p < line.size() && line[p] == '.') {
      ++p;
      continue;
    }
    break;
  }
  std::string_view close = array ? "]]" : "]";
  if (line.substr(p, close.size()) != close) {
    return std::nullopt;
  }
  std::string_view rest = Trim(line.substr(p + close.size()));
  if (!rest.empty() && rest[0] != '#') {
    return std::nullopt;
  }
  return keys;
}

// Splits TOML text into lines and classifies them, following multi-line strings and arrays so
// that their lines are never taken for headers or comments.
std::vector<Line> TomlLines(std::string_view text) {
  std::vector<Line> lines;
  std::string_view open_string;  // """ or ''' while inside a multi-line string
  int depth = 0;                 // open '[' of arrays
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    std::string_view body = text.substr(pos, end - pos);
    Line line{.begin = pos, .end = end};
    std::string_view trimmed = Trim(body);
    bool continued = !open_string.empty() || depth > 0;
    if (!continued && trimmed.empty()) {
      line.kind = LineKind::kBlank;
    } else if (!continued && trimmed[0] == '#') {
      line.kind = LineKind::kComment;
    } else if (!continued && trimmed[0] == '[') {
      if (std::optional<std::vector<std::string>> keys = HeaderKeys(trimmed)) {
        line.kind = LineKind::kHeader;
        line.header = *std::move(keys);
      }
    }
    if (line.kind == LineKind::kOther) {
      for (size_t i = 0; i < body.size(); ++i) {
        if (!open_string.empty()) {
          if (open_string[0] == '"' && body[i] == '\\') {
            ++i;
          } else if (body.substr(i, 3) == open_string) {
            i += 2;
            open_string = {};
          }
          continue;
        }
        char c = body[i];
        if (c == '#') {
          break;
        }
        if (body.substr(i, 3) == "\"\"\"" || body.substr(i, 3) == "'''") {
          open_string = c == '"' ? "\"\"\"" : "'''";
          i += 2;
        } else if (c == '"' || c == '\'') {
          for (++i; i < body.size() && body[i] != c; ++i) {
            if (c == '"' && body[i] == '\\') {
              ++i;
            }
          }
        } else if (c == '[') {
          ++depth;
        } else if (c == ']' && depth > 0) {
          --depth;
        }
      }
    }
    lines.push_back(std::move(line));
    pos = end;
  }
  return lines;
}

bool HasPrefix(const std::vector<std::string>& keys, const std::vector<std::string>& prefix) {
  if (keys.size() < prefix.size()) {
    return false;
  }
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (keys[i] != prefix[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<LineSpan> FindTomlTable(std::string_view text, const std::vector<std::string>& table,
                                      std::string_view lead_comment) {
  std::vector<Line> lines = TomlLines(text);
  size_t first = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].kind == LineKind::kHeader && HasPrefix(lines[i].header, table)) {
      first = i;
      break;
    }
  }
  if (first == lines.size()) {
    return std::nullopt;
  }
  size_t stop = first + 1;
  while (stop < lines.size() &&
         !(lines[stop].kind == LineKind::kHeader && !HasPrefix(lines[stop].header, table))) {
    ++stop;
  }
  size_t last = stop - 1;
  while (last > first &&
         (lines[last].kind == LineKind::kBlank || lines[last].kind == LineKind::kComment)) {
    --last;
  }
  size_t begin = lines[first].begin;
  if (first > 0 && lines[first - 1].kind == LineKind::kComment && !lead_comment.empty() &&
      TrimLeft(text.substr(lines[first - 1].begin, lines[first - 1].end - lines[first - 1].begin))
          .starts_with(lead_comment)) {
    begin = lines[first - 1].begin;
  }
  return LineSpan{.begin = begin, .end = lines[last].end};
}

absl::StatusOr<std::optional<LineSpan>> FindMarkedSection(std::string_view file,
                                                          std::string_view text,
                                                          std::string_view begin_marker,
                                                          std::string_view end_marker) {
  std::optional<size_t> begin;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    std::string_view line = Trim(text.substr(pos, end - pos));
    if (!begin && line == begin_marker) {
      begin = pos;
    } else if (begin && line == end_marker) {
      return LineSpan{.begin = *begin, .end = end};
    }
    pos = end;
  }
  if (begin) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(file), " has a '", std::string(begin_marker), "' line without a '",
                     std::string(end_marker),
                     "' line after it; put it back (or remove abox's section by hand), then run "
                     "this again. Nothing was written"));
  }
  return std::nullopt;
}

std::string SetBlock(std::string_view text, std::optional<LineSpan> span, std::string_view block) {
  if (span) {
    std::string out(text.substr(0, span->begin));
    out += block;
    out += text.substr(span->end);
    return out;
  }
  if (text.empty()) {
    return std::string(block);
  }
  std::string out(text);
  out += text.ends_with("\n") ? "\n" : "\n\n";
  out += block;
  return out;
}

std::string RemoveBlock(std::string_view text, LineSpan span) {
  std::string_view before = text.substr(0, span.begin);
  if (before.ends_with("\n\n")) {
    before.remove_suffix(1);
  }
  std::string out(before);
  out += text.substr(span.end);
  return out;
}

std::string LineDiff(std::string_view before, std::string_view after) {
  std::vector<std::string_view> a = Lines(before);
  std::vector<std::string_view> b = Lines(after);
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) {
    ++pre;
  }
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre &&
         a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) {
    ++suf;
  }
  std::string out = absl::StrCat("@@ line ", pre + 1, "\n");
  for (size_t i = pre; i < a.size() - suf; ++i) {
    absl::StrAppend(&out, "-", std::string(a[i]), "\n");
  }
  for (size_t i = pre; i < b.size() - suf; ++i) {
    absl::StrAppend(&out, "+", std::string(b[i]), "\n");
  }
  return out;
}

}  // namespace abox::cli
