#include "src/net/secret_swap.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

constexpr size_t kMaxSecretNameSize = 128;

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

bool IsTchar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

int HexValue(char c) {
  if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

// The length of `needle` at `pos` in a URL part where any byte may be percent-encoded (either
// hex case), or 0.
size_t MatchEncodedAt(absl::string_view text, size_t pos, absl::string_view needle) {
  size_t p = pos;
  for (char c : needle) {
    if (p < text.size() && text[p] == c) {
      ++p;
    } else if (p + 2 < text.size() && text[p] == '%' && HexValue(text[p + 1]) >= 0 &&
               HexValue(text[p + 2]) >= 0 &&
               static_cast<char>(HexValue(text[p + 1]) * 16 + HexValue(text[p + 2])) == c) {
      p += 3;
    } else {
      return 0;
    }
  }
  return p - pos;
}

// RFC 3986 unreserved bytes stay; every other byte becomes %XX.
std::string PercentEncode(absl::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : value) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
        c == '~') {
      out.push_back(c);
    } else {
      unsigned char u = static_cast<unsigned char>(c);
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    }
  }
  return out;
}

// The base64 credentials of "Basic <token>" (scheme in any case), or nullopt.
std::optional<absl::string_view> BasicToken(absl::string_view value) {
  if (value.size() < 6 || !absl::EqualsIgnoreCase(value.substr(0, 5), "basic") || value[5] != ' ') {
    return std::nullopt;
  }
  return absl::StripLeadingAsciiWhitespace(value.substr(6));
}

bool IsAuthorization(absl::string_view name) {
  return absl::EqualsIgnoreCase(name, "authorization") ||
         absl::EqualsIgnoreCase(name, "proxy-authorization");
}

absl::Status BindingError(const SecretBinding& b, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("secret '", QuoteForLog(b.name), "': ", why));
}

absl::Status Validate(const SecretBinding& b) {
  if (b.name.empty() || b.name.size() > kMaxSecretNameSize ||
      !std::all_of(b.name.begin(), b.name.end(), IsNameChar)) {
    return BindingError(
        b, absl::StrCat("a name is 1 to ", kMaxSecretNameSize, " characters of A-Z a-z 0-9 _ . -"));
  }
  if (b.placeholder.size() < kMinPlaceholderSize || b.placeholder.size() > kMaxPlaceholderSize ||
      !std::all_of(b.placeholder.begin(), b.placeholder.end(), IsNameChar)) {
    return BindingError(b, absl::StrCat("a placeholder is ", kMinPlaceholderSize, " to ",
                                        kMaxPlaceholderSize, " characters of A-Z a-z 0-9 _ . -"));
  }
  if (b.value.empty() || b.value.size() > kMaxSecretValueSize) {
    return BindingError(
        b, absl::StrCat("the value must be 1 to ", kMaxSecretValueSize, " bytes long"));
  }
  // It is written into a header line: a CR or LF would let it add headers (or a request).
  if (std::any_of(b.value.begin(), b.value.end(), [](char c) {
        unsigned char u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f;
      })) {
    return BindingError(b, "the value contains a control character (a newline?); strip it");
  }
  if (b.hosts.empty()) {
    return BindingError(b, "it must be bound to at least one host");
  }
  for (const std::string& h : b.headers) {
    if (h.empty() || !std::all_of(h.begin(), h.end(), IsTchar)) {
      return BindingError(b, absl::StrCat("'", QuoteForLog(h), "' is not a header name"));
    }
  }
  return absl::OkStatus();
}

bool HeaderAllowed(const SecretBinding& b, absl::string_view header) {
  return b.headers.empty() || std::any_of(b.headers.begin(), b.headers.end(), [&](const auto& h) {
           return absl::EqualsIgnoreCase(h, header);
         });
}

std::string HostsText(const SecretBinding& b) { return absl::StrJoin(b.hosts, ", "); }

// The work of one SwapSecrets call.
class Swapper {
 public:
  Swapper(const SecretTable& table, absl::string_view host, uint16_t port)
      : table_(table), host_(host), port_(port) {
    for (const SecretTable::Entry& e : table.entries()) {
      bound_.push_back(SecretTable::BoundTo(e, host, port));
    }
  }

  absl::StatusOr<SwapOutcome> Run(const HttpRequestHead& head);

 private:
  absl::Status FindLeaks(const HttpRequestHead& head);
  void RefuseLeak(absl::string_view secret, absl::string_view encoding, absl::string_view where);
  void NotAllowed(size_t entry, absl::string_view where, absl::string_view hint);
  std::string SwapTarget(absl::string_view target);
  std::string SwapHeaderValue(absl::string_view name, absl::string_view value);
  std::string SwapRaw(absl::string_view name, absl::string_view text, absl::string_view where);

  const SecretTable& table_;
  absl::string_view host_;
  uint16_t port_;
  std::vector<bool> bound_;
  std::vector<bool> used_ = std::vector<bool>(table_.entries().size(), false);
  std::optional<SecretRefusal> refusal_;
};

void Swapper::RefuseLeak(absl::string_view secret, absl::string_view encoding,
                         absl::string_view where) {
  std::string bound_hosts;
  for (const SecretTable::Entry& e : table_.entries()) {
    if (e.binding.name == secret) {
      bound_hosts = HostsText(e.binding);
    }
  }
  std::string how = encoding == "raw" ? "" : absl::StrCat(" (", encoding, ")");
  refusal_ =
      SecretRefusal{SecretRefusal::Kind::kLeak, std::string(secret), std::string(where),
                    absl::StrCat("abox: blocked a request to ", host_, ":", port_,
                                 ": it carries the placeholder ", "of secret '", secret, "'", how,
                                 " in ", where, ", but that secret is bound to ", bound_hosts,
                                 " only (a possible exfiltration attempt; it was logged)")};
}

void Swapper::NotAllowed(size_t entry, absl::string_view where, absl::string_view hint) {
  const SecretBinding& b = table_.entries()[entry].binding;
  refusal_ =
      SecretRefusal{SecretRefusal::Kind::kNotAllowed, b.name, std::string(where),
                    absl::StrCat("abox: refused a request to ", host_, ":", port_, ": secret '",
                                 b.name, "' may not go in ", where, "; ", hint)};
}

absl::Status Swapper::FindLeaks(const HttpRequestHead& head) {
  std::vector<Needle> needles = table_.LeakNeedlesFor(host_, port_);
  if (needles.empty()) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::shared_ptr<const LeakPatterns>> patterns =
      LeakPatterns::Create(std::move(needles));
  if (!patterns.ok()) {
    return patterns.status();  // the table was validated: not expected
  }
  auto scan = [&](absl::string_view text, absl::string_view where) {
    LeakDetector detector(*patterns);
    if (std::optional<Leak> leak = detector.Feed(text)) {
      RefuseLeak(leak->name, leak->encoding, where);
      return true;
    }
    return false;
  };
  if (scan(absl::StrCat(head.method, " ", head.target), "the request line")) {
    return absl::OkStatus();
  }
  for (const HttpHeader& h : head.headers) {
    std::string where = absl::StrCat("header '", QuoteForLog(h.name), "'");
    if (scan(absl::StrCat(h.name, ": ", h.value), where)) {
      return absl::OkStatus();
    }
    std::string decoded;
    if (std::optional<absl::string_view> token = BasicToken(h.value);
        token && IsAuthorization(h.name) && absl::Base64Unescape(*token, &decoded) &&
        scan(decoded, absl::StrCat(where, " (Basic credentials)"))) {
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

// The query may carry a bound secret if its binding says so; the path never.
std::string Swapper::SwapTarget(absl::string_view target) {
  size_t question = target.find('?');
  absl::string_view path = target.substr(0, question);
  for (size_t pos = 0; pos < path.size(); ++pos) {
    for (size_t i = 0; i < bound_.size(); ++i) {
      if (bound_[i] && MatchEncodedAt(path, pos, table_.entries()[i].binding.placeholder) > 0) {
        NotAllowed(i, "the URL path", "only headers (and the query, if allowed) are swapped");
        return {};
      }
    }
  }
  if (question == absl::string_view::npos) {
    return std::string(target);
  }
  absl::string_view query = target.substr(question);
  std::string out(path);
  for (size_t pos = 0; pos < query.size();) {
    size_t matched = 0;
    for (size_t i = 0; i < bound_.size() && matched == 0; ++i) {
      const SecretBinding& b = table_.entries()[i].binding;
      if (!bound_[i] || (matched = MatchEncodedAt(query, pos, b.placeholder)) == 0) {
        continue;
      }
      if (!b.allow_query) {
        NotAllowed(i, "the URL query", "send it in a header, or allow the query for it");
        return {};
      }
      out.append(PercentEncode(b.value));
      used_[i] = true;
    }
    if (matched == 0) {
      out.push_back(query[pos]);
      matched = 1;
    }
    pos += matched;
  }
  return out;
}

// Replaces each bound placeholder in `text` (a header value or Basic credentials), leftmost
// first, in one pass: a value that happens to contain a placeholder is not swapped again.
std::string Swapper::SwapRaw(absl::string_view name, absl::string_view text,
                             absl::string_view where) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    size_t matched = 0;
    for (size_t i = 0; i < bound_.size() && matched == 0; ++i) {
      const SecretBinding& b = table_.entries()[i].binding;
      if (!bound_[i] || !absl::StartsWith(text.substr(pos), b.placeholder)) {
        continue;
      }
      if (!HeaderAllowed(b, name)) {
        NotAllowed(i, where,
                   absl::StrCat("it may go in ", absl::StrJoin(b.headers, ", "), " only"));
        return {};
      }
      out.append(b.value);
      used_[i] = true;
      matched = b.placeholder.size();
    }
    if (matched == 0) {
      out.push_back(text[pos]);
      matched = 1;
    }
    pos += matched;
  }
  return out;
}

std::string Swapper::SwapHeaderValue(absl::string_view name, absl::string_view value) {
  std::string where = absl::StrCat("header '", QuoteForLog(name), "'");
  std::string out = SwapRaw(name, value, where);
  if (refusal_) {
    return {};
  }
  std::string decoded;
  std::optional<absl::string_view> token = BasicToken(out);
  if (!token || !absl::EqualsIgnoreCase(name, "authorization") ||
      !absl::Base64Unescape(*token, &decoded)) {
    return out;
  }
  std::string swapped = SwapRaw(name, decoded, absl::StrCat(where, " (Basic credentials)"));
  if (refusal_ || swapped == decoded) {
    return refusal_ ? std::string() : out;
  }
  return absl::StrCat(out.substr(0, 6), absl::Base64Escape(swapped));
}

absl::StatusOr<SwapOutcome> Swapper::Run(const HttpRequestHead& head) {
  SwapOutcome outcome;
  if (absl::Status s = FindLeaks(head); !s.ok()) {
    return s;
  }
  std::string target;
  if (!refusal_) {
    target = SwapTarget(head.target);
  }
  std::vector<HttpHeader> headers;
  for (const HttpHeader& h : head.headers) {
    if (refusal_) {
      break;
    }
    for (size_t i = 0; i < bound_.size(); ++i) {
      if (bound_[i] && absl::StrContains(h.name, table_.entries()[i].binding.placeholder)) {
        NotAllowed(i, "a header name", "put it in a header value");
        break;
      }
    }
    if (!refusal_) {
      headers.push_back({h.name, SwapHeaderValue(h.name, h.value)});
    }
  }
  if (refusal_) {
    outcome.refusal = std::move(refusal_);
    return outcome;
  }
  absl::StrAppend(&outcome.head, head.method, " ", target, " HTTP/1.", head.minor_version, "\r\n");
  for (const HttpHeader& h : headers) {
    absl::StrAppend(&outcome.head, h.name, ": ", h.value, "\r\n");
  }
  outcome.head.append("\r\n");
  if (outcome.head.size() > kMaxSwappedHeadSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("refused HTTP request: the head with secrets swapped in exceeds ",
                     kMaxSwappedHeadSize, " bytes"));
  }
  for (size_t i = 0; i < used_.size(); ++i) {
    if (used_[i]) {
      outcome.swapped.push_back(table_.entries()[i].binding.name);
    }
  }
  return outcome;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const SecretTable>> SecretTable::Create(
    std::vector<SecretBinding> bindings) {
  if (bindings.size() > kMaxNeedles) {
    return absl::InvalidArgumentError(
        absl::StrCat("too many secrets (", bindings.size(), "; at most ", kMaxNeedles, ")"));
  }
  std::shared_ptr<SecretTable> table(new SecretTable());
  for (SecretBinding& b : bindings) {
    if (absl::Status s = Validate(b); !s.ok()) {
      return s;
    }
    for (const Entry& other : table->entries_) {
      if (other.binding.name == b.name) {
        return BindingError(b, "two secrets have this name");
      }
      const std::string& p = other.binding.placeholder;
      if (absl::StrContains(p, b.placeholder) || absl::StrContains(b.placeholder, p)) {
        return BindingError(b,
                            absl::StrCat("its placeholder and that of secret '", other.binding.name,
                                         "' contain one another (ambiguous)"));
      }
    }
    Entry entry;
    entry.hosts.mode = EgressPolicy::Mode::kAllowlist;
    for (const std::string& h : b.hosts) {
      absl::StatusOr<Rule> rule = ParseRule(h);
      if (!rule.ok()) {
        return BindingError(b, rule.status().message());
      }
      if (rule->kind != Rule::Kind::kExact && rule->kind != Rule::Kind::kWildcard) {
        return BindingError(b, absl::StrCat("'", QuoteForLog(h),
                                            "': a secret is bound to host names (NAME, *.NAME, "
                                            "NAME:PORT), not presets or addresses"));
      }
      entry.hosts.allow.push_back(*std::move(rule));
    }
    entry.binding = std::move(b);
    table->entries_.push_back(std::move(entry));
  }
  return std::shared_ptr<const SecretTable>(std::move(table));
}

bool SecretTable::BoundTo(const Entry& entry, absl::string_view host, uint16_t port) {
  return !host.empty() && Decide(entry.hosts, host, port).allowed;
}

std::vector<Needle> SecretTable::LeakNeedlesFor(absl::string_view host, uint16_t port) const {
  std::vector<Needle> needles;
  for (const Entry& e : entries_) {
    if (!BoundTo(e, host, port)) {
      needles.push_back({e.binding.name, e.binding.placeholder});
    }
  }
  return needles;
}

absl::StatusOr<SwapOutcome> SwapSecrets(const SecretTable& table, const HttpRequestHead& head,
                                        absl::string_view host, uint16_t port) {
  if (host.empty()) {
    return absl::InvalidArgumentError("no destination host to swap secrets for");
  }
  return Swapper(table, host, port).Run(head);
}

}  // namespace abox::net
