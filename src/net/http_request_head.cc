#include "src/net/http_request_head.h"

#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/net/address_filter.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

// RFC 9110 5.6.2 token characters.
bool IsTchar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

bool IsToken(absl::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), IsTchar); }

HttpSniff Result(HttpSniffResult result, std::string reason) {
  HttpSniff sniff;
  sniff.result = result;
  sniff.reason = std::move(reason);
  return sniff;
}

HttpSniff Invalid(absl::string_view reason) {
  return Result(HttpSniffResult::kInvalid, absl::StrCat("refused HTTP request: ", reason));
}

// "METHOD SP request-target SP HTTP/1.d" with single spaces (RFC 9112 3). Anything else is
// not an HTTP/1.x request (HTTP/0.9, the HTTP/2 preface "PRI * HTTP/2.0" and other protocols).
bool ParseRequestLine(absl::string_view line, HttpRequestHead* head) {
  std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || !IsToken(parts[0]) || parts[0].size() > kMaxMethodLength ||
      parts[1].empty()) {
    return false;
  }
  for (char c : parts[1]) {
    if (c <= 0x20 || c >= 0x7f) {
      return false;
    }
  }
  absl::string_view version = parts[2];
  if (version.size() != 8 || !absl::StartsWith(version, "HTTP/1.") ||
      !absl::ascii_isdigit(static_cast<unsigned char>(version[7]))) {
    return false;
  }
  head->method = std::string(parts[0]);
  head->target = std::string(parts[1]);
  head->minor_version = version[7] - '0';
  return true;
}

// host [":" port] as in a Host header, a CONNECT target or an absolute-form URI (RFC 3986
// 3.2). IPv6 only in brackets; userinfo refused (a classic way to show one host and mean
// another: "http://allowed.example@evil.example/").
absl::StatusOr<HttpDestination> ParseAuthority(absl::string_view text, bool require_port,
                                               absl::string_view what) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", QuoteForLog(text), "': ", why));
  };
  if (text.empty()) {
    return bad("empty host");
  }
  if (absl::StrContains(text, '@')) {
    return bad("userinfo ('@') is not allowed");
  }
  absl::string_view host = text;
  absl::string_view port_text;
  bool has_port = false;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return bad("unterminated '['");
    }
    host = text.substr(0, close + 1);
    absl::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return bad("junk after ']'");
      }
      port_text = rest.substr(1);
      has_port = true;
    }
  } else if (size_t colon = text.find(':'); colon != absl::string_view::npos) {
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    has_port = true;
    if (absl::StrContains(port_text, ':')) {
      return bad("an IPv6 address must be in brackets");
    }
  }
  HttpDestination dest;
  dest.port = 0;  // "none given": the caller applies its default
  if (has_port) {
    uint32_t port = 0;
    if (port_text.empty() || port_text.size() > 5 ||
        !std::all_of(port_text.begin(), port_text.end(),
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
        !absl::SimpleAtoi(port_text, &port) || port == 0 || port > 65535) {
      return bad("port is not a number from 1 to 65535");
    }
    dest.port = static_cast<uint16_t>(port);
  } else if (require_port) {
    return bad("a port is required (host:port)");
  }
  if (std::optional<IpAddress> ip = ParseIpLiteralHost(host)) {
    dest.host = ip->ToString();
    dest.is_ip_literal = true;
    return dest;
  }
  absl::StatusOr<std::string> name = NormalizeHostName(host);
  if (!name.ok()) {
    return bad(name.status().message());
  }
  dest.host = *std::move(name);
  return dest;
}

bool SameDestination(const HttpDestination& a, const HttpDestination& b) {
  return a.host == b.host && a.port == b.port;
}

// Where the request goes, from the target and the Host header (RFC 9112 3.2).
absl::Status ResolveDestination(HttpRequestHead* head) {
  const HttpHeader* host = nullptr;
  for (const HttpHeader& h : head->headers) {
    if (absl::EqualsIgnoreCase(h.name, "host")) {
      if (host != nullptr) {
        return absl::InvalidArgumentError("more than one Host header");
      }
      host = &h;
    }
  }
  std::optional<HttpDestination> from_host;
  if (host != nullptr) {
    auto parsed = ParseAuthority(host->value, /*require_port=*/false, "Host");
    if (!parsed.ok()) {
      return parsed.status();
    }
    from_host = *std::move(parsed);
  }
  // A Host without a port names the target's port for CONNECT and 80 otherwise.
  bool host_has_port = from_host && from_host->port != 0;
  absl::string_view target = head->target;
  if (head->is_connect()) {
    auto parsed = ParseAuthority(target, /*require_port=*/true, "CONNECT target");
    if (!parsed.ok()) {
      return parsed.status();
    }
    if (from_host &&
        (from_host->host != parsed->host || (host_has_port && from_host->port != parsed->port))) {
      return absl::InvalidArgumentError("Host header does not match the CONNECT target");
    }
    head->destination = *std::move(parsed);
    return absl::OkStatus();
  }
  if (!from_host) {
    return absl::InvalidArgumentError("no Host header (the proxy decides by the host name)");
  }
  if (!host_has_port) {
    from_host->port = 80;
  }
  if (size_t scheme_end = target.find("://");
      scheme_end != absl::string_view::npos && target.front() != '/') {
    absl::string_view scheme = target.substr(0, scheme_end);
    if (!absl::EqualsIgnoreCase(scheme, "http")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "absolute-form target with scheme '", QuoteForLog(scheme), "' (only http; use CONNECT)"));
    }
    absl::string_view rest = target.substr(scheme_end + 3);
    absl::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
    auto parsed = ParseAuthority(authority, /*require_port=*/false, "target authority");
    if (!parsed.ok()) {
      return parsed.status();
    }
    if (parsed->port == 0) {
      parsed->port = 80;
    }
    if (!SameDestination(*parsed, *from_host)) {
      return absl::InvalidArgumentError(absl::StrCat("target authority ", parsed->host, ":",
                                                     parsed->port, " does not match Host ",
                                                     from_host->host, ":", from_host->port));
    }
  } else if (target.front() != '/' && !(target == "*" && head->method == "OPTIONS")) {
    return absl::InvalidArgumentError(
        absl::StrCat("request target '", QuoteForLog(target),
                     "' is not origin-form (/path), absolute-form (http://...) or '*'"));
  }
  head->destination = *std::move(from_host);
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseHeaderLines(absl::string_view block, size_t max_headers,
                              std::vector<HttpHeader>* headers) {
  for (absl::string_view line : absl::StrSplit(block, "\r\n", absl::SkipEmpty())) {
    if (headers->size() == max_headers) {
      return absl::InvalidArgumentError(absl::StrCat("more than ", max_headers, " headers"));
    }
    if (line.front() == ' ' || line.front() == '\t') {
      return absl::InvalidArgumentError("obsolete line folding (obs-fold) is not accepted");
    }
    size_t colon = line.find(':');
    absl::string_view name = line.substr(0, colon);
    if (colon == absl::string_view::npos || !IsToken(name)) {
      // Includes whitespace before ':', which RFC 9112 5.1 says to reject.
      return absl::InvalidArgumentError(absl::StrCat("bad header line '", QuoteForLog(line), "'"));
    }
    absl::string_view value = line.substr(colon + 1);
    for (char c : value) {
      unsigned char u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) {
        return absl::InvalidArgumentError(
            absl::StrCat("control byte in the value of header '", QuoteForLog(name), "'"));
      }
    }
    value = absl::StripTrailingAsciiWhitespace(absl::StripLeadingAsciiWhitespace(value));
    headers->push_back({std::string(name), std::string(value)});
  }
  return absl::OkStatus();
}

const HttpSniff& HttpRequestHeadParser::Feed(absl::string_view data) {
  if (state_.result != HttpSniffResult::kNeedMore) {
    return state_;
  }
  buffer_.append(data.data(), data.size());
  state_ = Step();
  return state_;
}

HttpSniff HttpRequestHeadParser::Step() {
  if (request_line_end_ == 0) {
    // Decide "not HTTP" as soon as the method cannot be one: a binary protocol fails on its
    // first byte instead of after 16 KiB.
    size_t n = std::min(buffer_.size(), kMaxMethodLength + 1);
    for (size_t i = 0; i < n; ++i) {
      if (buffer_[i] == ' ') {
        if (i == 0) {
          return Result(HttpSniffResult::kNotHttp, "request line starts with a space");
        }
        break;
      }
      if (!IsTchar(buffer_[i]) || i == kMaxMethodLength) {
        return Result(HttpSniffResult::kNotHttp, "does not start with an HTTP method");
      }
    }
  }
  for (; scanned_ < buffer_.size(); ++scanned_) {
    if (scanned_ >= kMaxRequestHeadSize) {
      return Invalid(absl::StrCat("request head exceeds ", kMaxRequestHeadSize, " bytes"));
    }
    char c = buffer_[scanned_];
    if (c == '\r') {
      if (scanned_ + 1 == buffer_.size()) {
        break;  // Decide when the next byte arrives.
      }
      if (buffer_[scanned_ + 1] != '\n') {
        return Invalid("bare CR (not followed by LF)");
      }
      continue;
    }
    if (c == '\n') {
      bool crlf = scanned_ > 0 && buffer_[scanned_ - 1] == '\r';
      absl::string_view line(buffer_.data() + line_start_, scanned_ - line_start_ - (crlf ? 1 : 0));
      if (request_line_end_ == 0) {
        if (!ParseRequestLine(line, &state_.head)) {
          return Result(HttpSniffResult::kNotHttp, "first line is not an HTTP/1.x request line");
        }
        if (!crlf) {
          return Invalid("bare LF ends the request line");
        }
        request_line_end_ = scanned_ + 1;
        line_start_ = scanned_ + 1;
        continue;
      }
      if (!crlf) {
        return Invalid("bare LF (not preceded by CR)");
      }
      if (!line.empty()) {
        line_start_ = scanned_ + 1;
        continue;
      }
      HttpSniff sniff;
      sniff.head = std::move(state_.head);
      sniff.head.head_size = scanned_ + 1;
      absl::string_view block(buffer_.data() + request_line_end_, line_start_ - request_line_end_);
      absl::Status status = ParseHeaderLines(block, kMaxRequestHeaders, &sniff.head.headers);
      if (status.ok()) {
        status = ResolveDestination(&sniff.head);
      }
      if (!status.ok()) {
        return Invalid(std::string(status.message()));
      }
      sniff.result = HttpSniffResult::kHttp;
      return sniff;
    }
    if (c == '\0') {
      return request_line_end_ == 0 ? Result(HttpSniffResult::kNotHttp, "NUL in the first line")
                                    : Invalid("NUL byte in the request head");
    }
  }
  HttpSniff more;
  more.head = std::move(state_.head);  // Keeps the parsed request line across calls.
  return more;
}

HttpSniff ParseHttpRequestHead(absl::string_view bytes) {
  HttpRequestHeadParser parser;
  return parser.Feed(bytes);
}

}  // namespace abox::net
