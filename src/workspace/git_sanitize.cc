#include "src/workspace/git_sanitize.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::workspace {
namespace {

// The parser mirrors git's config.c (git_parse_source, get_base_var, get_value, parse_value)
// so that it accepts exactly what git accepts and reads each key the way git reads it.

// git's sane_ctype: ASCII only, and isspace is just these four.
bool IsSpace(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsKeyChar(int c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-'; }
char Lower(int c) { return absl::ascii_tolower(static_cast<unsigned char>(c)); }

struct Header {
  size_t begin = 0;                   // '['
  size_t end = 0;                     // just past ']'
  size_t name_end = 0;                // end of the section name in the raw text
  std::string name;                   // lowercased, legacy "a.b" form included
  std::optional<std::string> quoted;  // the "subsection" of [name "subsection"], unescaped
  // The first dot-separated part of the name: what the rules match on.
  [[nodiscard]] std::string section() const { return name.substr(0, name.find('.')); }
};

struct Entry {
  size_t begin = 0;                  // first character of the key
  size_t key_end = 0;                // just past the key
  size_t end = 0;                    // just past the newline that ends the value (or the input)
  std::string key;                   // lowercased
  std::optional<std::string> value;  // nullopt for a bare key (boolean true)
};

using Item = std::variant<Header, Entry>;

// git's get_next_char: "\r\n" reads as '\n', and the end of input reads as '\n' with eof set.
class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}
  int Next() {
    if (pos_ >= in_.size()) {
      eof_ = true;
      return '\n';
    }
    char c = in_[pos_++];
    if (c == '\r' && pos_ < in_.size() && in_[pos_] == '\n') {
      ++pos_;
      return '\n';
    }
    return static_cast<unsigned char>(c);
  }
  [[nodiscard]] size_t pos() const { return pos_; }
  [[nodiscard]] bool eof() const { return eof_; }
  void Skip(size_t n) { pos_ += n; }
  // An error at the current position, with git's 1-based line number.
  [[nodiscard]] absl::Status Error(absl::string_view what) const {
    size_t upto = std::min(pos_ == 0 ? 0 : pos_ - 1, in_.size());
    size_t line = 1 + std::count(in_.begin(), in_.begin() + static_cast<ptrdiff_t>(upto), '\n');
    return absl::InvalidArgumentError(
        absl::StrCat("git config line ", line, ": ", what, " (git would not parse it either)"));
  }

 private:
  absl::string_view in_;
  size_t pos_ = 0;
  bool eof_ = false;
};

// After '[': the name, then `]` or a quoted subsection.
absl::StatusOr<Header> ParseHeader(Reader& r, size_t begin) {
  Header h;
  h.begin = begin;
  int c = 0;
  for (;;) {
    h.name_end = r.pos();
    c = r.Next();
    if (r.eof()) {
      return r.Error("unterminated section header");
    }
    if (c == ']' || IsSpace(c)) {
      break;
    }
    if (!IsKeyChar(c) && c != '.') {
      return r.Error("bad character in a section name");
    }
    h.name.push_back(Lower(c));
  }
  if (h.name.empty()) {
    return r.Error("empty section name");
  }
  if (c == ']') {
    h.end = r.pos();
    return h;
  }
  do {
    if (c == '\n') {
      return r.Error("unterminated section header");
    }
    c = r.Next();
  } while (IsSpace(c));
  if (c != '"') {
    return r.Error("a subsection must be quoted: [section \"subsection\"]");
  }
  std::string sub;
  for (;;) {
    c = r.Next();
    if (c == '\n') {
      return r.Error("unterminated subsection");
    }
    if (c == '"') {
      break;
    }
    if (c == '\\') {
      c = r.Next();
      if (c == '\n') {
        return r.Error("unterminated subsection");
      }
    }
    sub.push_back(static_cast<char>(c));
  }
  if (r.Next() != ']') {
    return r.Error("expected ']' after the subsection");
  }
  h.quoted = std::move(sub);
  h.end = r.pos();
  return h;
}

// After '=': the value up to the end of the line, with quotes, escapes and continuations.
absl::StatusOr<std::string> ParseValue(Reader& r) {
  std::string v;
  bool quote = false;
  bool comment = false;
  size_t space = 0;
  for (;;) {
    int c = r.Next();
    if (c == '\n') {
      if (quote) {
        return r.Error("unterminated quote in a value");
      }
      return v;
    }
    if (comment) {
      continue;
    }
    if (IsSpace(c) && !quote) {
      if (!v.empty()) {
        ++space;
      }
      continue;
    }
    if (!quote && (c == ';' || c == '#')) {
      comment = true;
      continue;
    }
    v.append(space, ' ');
    space = 0;
    if (c == '\\') {
      c = r.Next();
      switch (c) {
        case '\n':
          continue;  // line continuation
        case 't':
          c = '\t';
          break;
        case 'b':
          c = '\b';
          break;
        case 'n':
          c = '\n';
          break;
        case '\\':
        case '"':
          break;
        default:
          return r.Error("unknown escape sequence in a value");
      }
      v.push_back(static_cast<char>(c));
      continue;
    }
    if (c == '"') {
      quote = !quote;
      continue;
    }
    v.push_back(static_cast<char>(c));
  }
}

// `first` (a letter) starts the key at `begin`.
absl::StatusOr<Entry> ParseEntry(Reader& r, size_t begin, int first) {
  Entry e;
  e.begin = begin;
  e.key.push_back(Lower(first));
  int c = 0;
  for (;;) {
    e.key_end = r.pos();
    c = r.Next();
    if (r.eof() || !IsKeyChar(c)) {
      break;
    }
    e.key.push_back(Lower(c));
  }
  while (c == ' ' || c == '\t') {
    c = r.Next();
  }
  if (c != '\n') {
    if (c != '=') {
      return r.Error(absl::StrCat("expected '=' or the end of the line after key '", e.key, "'"));
    }
    ABOX_ASSIGN_OR_RETURN(e.value, ParseValue(r));
  }
  e.end = r.pos();
  return e;
}

absl::StatusOr<std::vector<Item>> Parse(absl::string_view in) {
  if (in.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError("git config contains a NUL byte");
  }
  Reader r(in);
  if (absl::StartsWith(in, "\xef\xbb\xbf")) {
    r.Skip(3);  // git skips a UTF-8 byte order mark
  }
  std::vector<Item> items;
  bool comment = false;
  for (;;) {
    size_t begin = r.pos();
    int c = r.Next();
    if (c == '\n') {
      if (r.eof()) {
        return items;
      }
      comment = false;
      continue;
    }
    if (comment || IsSpace(c)) {
      continue;
    }
    if (c == '#' || c == ';') {
      comment = true;
      continue;
    }
    if (c == '[') {
      ABOX_ASSIGN_OR_RETURN(Header h, ParseHeader(r, begin));
      items.emplace_back(std::move(h));
      continue;
    }
    if (!absl::ascii_isalpha(static_cast<unsigned char>(c))) {
      return r.Error("expected a section header, a key or a comment");
    }
    ABOX_ASSIGN_OR_RETURN(Entry e, ParseEntry(r, begin, c));
    items.emplace_back(std::move(e));
  }
}

// ---- The policy: what goes, and why (the reason is written into the sanitized file). ----

enum class Action { kKeep, kDrop, kStripUrl, kStripProxy };

struct Decision {
  Action action = Action::kKeep;
  const char* reason = "";
};

const char* DroppedSectionReason(absl::string_view section) {
  if (section == "credential") {
    return "credential helpers and user names hand host credentials to whoever runs git";
  }
  if (section == "includeif") {
    return "conditional includes pull in host files that may hold secrets";
  }
  return nullptr;
}

Decision Decide(absl::string_view section, absl::string_view key) {
  if (section == "include" && key == "path") {
    return {Action::kDrop, "includes pull in host files that may hold secrets"};
  }
  if (section == "core") {
    if (key == "hookspath") {
      return {Action::kDrop, "hooks do not go into the guest"};
    }
    if (key == "fsmonitor") {
      return {Action::kDrop, "runs a host program or daemon"};
    }
    if (key == "sshcommand") {
      return {Action::kDrop, "a host ssh command, often with host key paths"};
    }
    if (key == "askpass") {
      return {Action::kDrop, "a host program that hands out passwords"};
    }
    if (key == "worktree") {
      return {Action::kDrop, "a host path the sandbox does not have"};
    }
  }
  if (section == "http") {
    if (key == "extraheader") {
      return {Action::kDrop, "extra headers usually carry an Authorization token"};
    }
    if (key == "cookiefile") {
      return {Action::kDrop, "cookies can be session credentials"};
    }
    if (key == "sslkey" || key == "sslcert" || key == "sslcertpasswordprotected") {
      return {Action::kDrop, "client certificate authentication from host files"};
    }
    if (key == "proxy") {
      return {Action::kStripProxy, ""};
    }
  }
  if (section == "remote") {
    if (key == "url" || key == "pushurl") {
      return {Action::kStripUrl, ""};
    }
    if (key == "proxy") {
      return {Action::kStripProxy, ""};
    }
  }
  if (section == "url" && (key == "insteadof" || key == "pushinsteadof")) {
    return {Action::kStripUrl, ""};
  }
  if (section == "submodule" && key == "url") {
    return {Action::kStripUrl, ""};
  }
  if (section == "sendemail" && key == "smtppass") {
    return {Action::kDrop, "an SMTP password"};
  }
  if (absl::StrContains(key, "token") || absl::StrContains(key, "password") ||
      absl::StrContains(key, "secret")) {
    return {Action::kDrop, "named like a secret"};
  }
  return {};
}

// A value git reads back as `value`: quoted, with git's escapes.
std::string QuoteValue(absl::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      default:
        out.push_back(c);
    }
  }
  out += "\"";
  return out;
}

// A subsection git reads back as `sub` (only '"' and '\' need a backslash).
std::string QuoteSubsection(absl::string_view sub) {
  std::string out = "\"";
  for (char c : sub) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  out += "\"";
  return out;
}

bool IsSshScheme(absl::string_view scheme) {
  return scheme == "ssh" || scheme == "git+ssh" || scheme == "ssh+git";
}

void AddRemoved(std::vector<std::string>* removed, std::string name) {
  if (removed != nullptr && std::find(removed->begin(), removed->end(), name) == removed->end()) {
    removed->push_back(std::move(name));
  }
}

}  // namespace

std::string StripUrlCredentials(absl::string_view url, bool schemeless_authority) {
  size_t auth_begin = 0;
  std::string scheme;
  size_t sep = url.find("://");
  bool has_scheme = sep != absl::string_view::npos && sep > 0 &&
                    absl::ascii_isalpha(static_cast<unsigned char>(url[0])) &&
                    std::all_of(url.begin(), url.begin() + static_cast<ptrdiff_t>(sep), [](char c) {
                      return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '+' ||
                             c == '.' || c == '-';
                    });
  if (has_scheme) {
    scheme = absl::AsciiStrToLower(url.substr(0, sep));
    auth_begin = sep + 3;
  } else if (!schemeless_authority) {
    return std::string(url);  // scp-like user@host:path, or a local path
  }
  size_t auth_end = url.find_first_of("/?#", auth_begin);
  if (auth_end == absl::string_view::npos) {
    auth_end = url.size();
  }
  absl::string_view authority = url.substr(auth_begin, auth_end - auth_begin);
  // The host cannot hold '@', so the last one ends the userinfo even if a password has one.
  size_t at = authority.rfind('@');
  if (at == absl::string_view::npos) {
    return std::string(url);
  }
  absl::string_view userinfo = authority.substr(0, at);
  std::string kept_userinfo;
  if (IsSshScheme(scheme)) {
    kept_userinfo = std::string(userinfo.substr(0, userinfo.find(':')));
    if (kept_userinfo == userinfo) {
      return std::string(url);  // just a user name
    }
    kept_userinfo += "@";
  }
  return absl::StrCat(url.substr(0, auth_begin), kept_userinfo, authority.substr(at + 1),
                      url.substr(auth_end));
}

absl::StatusOr<std::string> SanitizeGitConfig(absl::string_view config,
                                              std::vector<std::string>* removed) {
  ABOX_ASSIGN_OR_RETURN(std::vector<Item> items, Parse(config));
  std::string out;
  out.reserve(config.size());
  size_t pos = 0;
  bool dropping = false;  // inside a section that goes as a whole
  std::string section;
  auto copy_upto = [&](size_t upto) {
    if (!dropping) {
      absl::StrAppend(&out, config.substr(pos, upto - pos));
    }
    pos = upto;
  };
  // Our comments and rewritten lines start on a line of their own (after the indentation
  // already copied, if that is all the line holds so far).
  auto start_line = [&] {
    size_t line = out.rfind('\n');
    line = line == std::string::npos ? 0 : line + 1;
    if (out.find_first_not_of(" \t", line) != std::string::npos) {
      out.push_back('\n');
    }
  };
  for (const Item& item : items) {
    if (const Header* h = std::get_if<Header>(&item)) {
      copy_upto(h->begin);
      section = h->section();
      const char* drop_reason = DroppedSectionReason(section);
      dropping = drop_reason != nullptr;
      if (dropping) {
        start_line();
        absl::StrAppend(&out, "# abox: removed a [", section, "] section: ", drop_reason, "\n");
      } else if ((section == "url" || section == "http") && h->quoted.has_value() &&
                 StripUrlCredentials(*h->quoted) != *h->quoted) {
        start_line();
        absl::StrAppend(&out, "# abox: credentials removed from the URL in the next header\n",
                        config.substr(h->begin, h->name_end - h->begin), " ",
                        QuoteSubsection(StripUrlCredentials(*h->quoted)), "]");
        AddRemoved(removed, section == "url" ? "url.<base>" : "http.<url>");
      } else {
        absl::StrAppend(&out, config.substr(h->begin, h->end - h->begin));
      }
      pos = h->end;
      continue;
    }
    const auto& e = std::get<Entry>(item);
    copy_upto(e.begin);
    pos = e.end;
    std::string name = section.empty() ? e.key : absl::StrCat(section, ".", e.key);
    if (dropping) {
      AddRemoved(removed, name);
      continue;
    }
    Decision d = Decide(section, e.key);
    std::optional<std::string> stripped;
    if ((d.action == Action::kStripUrl || d.action == Action::kStripProxy) && e.value) {
      std::string s = StripUrlCredentials(*e.value, d.action == Action::kStripProxy);
      if (s != *e.value) {
        stripped = std::move(s);
      }
    }
    if (d.action == Action::kDrop) {
      start_line();
      absl::StrAppend(&out, "# abox: removed ", name, ": ", d.reason, "\n");
      AddRemoved(removed, name);
    } else if (stripped) {
      start_line();
      absl::StrAppend(&out, config.substr(e.begin, e.key_end - e.begin), " = ",
                      QuoteValue(*stripped), " # abox: credentials removed from this URL\n");
      AddRemoved(removed, name);
    } else {
      absl::StrAppend(&out, config.substr(e.begin, e.end - e.begin));
    }
  }
  copy_upto(config.size());
  // Our own output must read back as a config: a failure here is a bug in this file.
  absl::StatusOr<std::vector<Item>> reparsed = Parse(out);
  if (!reparsed.ok()) {
    return absl::InternalError(
        absl::StrCat("sanitized git config does not parse: ", reparsed.status().message()));
  }
  return out;
}

std::string MinimalGitConfig() {
  return "# abox: the host's .git/config could not be sanitized, so this minimal config\n"
         "# replaces it: remotes, upstreams and other settings are not available here.\n"
         "[core]\n"
         "\trepositoryformatversion = 0\n"
         "\tfilemode = true\n"
         "\tbare = false\n"
         "\tlogallrefupdates = true\n";
}

}  // namespace abox::workspace
