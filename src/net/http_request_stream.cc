#include "src/net/http_request_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

// Content-Length of up to 18 digits fits in uint64_t without overflow checks.
constexpr size_t kMaxLengthDigits = 18;
// A chunk size of up to 15 hex digits (< 2^60): more is not a body a client sends.
constexpr size_t kMaxChunkSizeDigits = 15;

absl::Status Framing(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("refused HTTP request: ", why));
}

bool IsDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
}

bool IsTchar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

// "Transfer_Encoding" is not Transfer-Encoding to this proxy, but some servers (CGI-style
// gateways) map '_' to '-': such a spelling of a framing header is refused.
bool LooksLike(absl::string_view name, absl::string_view framing_header) {
  if (name.size() != framing_header.size()) {
    return false;
  }
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i] == '_' ? '-' : absl::ascii_tolower(static_cast<unsigned char>(name[i]));
    if (c != framing_header[i]) {
      return false;
    }
  }
  return true;
}

// One trailer field line without its CRLF (RFC 9112 7.1.2: field lines as in a head).
bool IsFieldLine(absl::string_view line) {
  size_t colon = line.find(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return false;
  }
  absl::string_view name = line.substr(0, colon);
  if (!std::all_of(name.begin(), name.end(), IsTchar)) {
    return false;
  }
  absl::string_view value = line.substr(colon + 1);
  return std::none_of(value.begin(), value.end(), [](char c) {
    unsigned char u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
}

}  // namespace

absl::StatusOr<RequestFraming> CheckRequestFraming(const HttpRequestHead& head) {
  if (head.is_connect()) {
    return absl::PermissionDeniedError(
        "refused HTTP request: CONNECT inside a connection (a tunnel the proxy cannot follow); "
        "send each CONNECT on a new connection to the proxy");
  }
  const HttpHeader* transfer_encoding = nullptr;
  const HttpHeader* content_length = nullptr;
  for (const HttpHeader& h : head.headers) {
    for (absl::string_view framing : {"transfer-encoding", "content-length", "upgrade"}) {
      if (LooksLike(h.name, framing) && !absl::EqualsIgnoreCase(h.name, framing)) {
        return Framing(absl::StrCat("header '", QuoteForLog(h.name), "' could be read as ", framing,
                                    " by the server"));
      }
    }
    if (absl::EqualsIgnoreCase(h.name, "upgrade")) {
      // Whether the upstream switched protocols shows only in its response; a server that
      // ignores the Upgrade would read the bytes after it as more requests.
      return absl::PermissionDeniedError(absl::StrCat(
          "refused HTTP request: 'Upgrade: ", QuoteForLog(h.value),
          "' over plain HTTP (WebSocket ws://, h2c) is not supported by the egress proxy, which "
          "must check every request on the connection; use https:// or wss:// instead"));
    }
    if (absl::EqualsIgnoreCase(h.name, "transfer-encoding")) {
      if (transfer_encoding != nullptr) {
        return Framing("more than one Transfer-Encoding header");
      }
      transfer_encoding = &h;
    } else if (absl::EqualsIgnoreCase(h.name, "content-length")) {
      if (content_length != nullptr) {
        return Framing("more than one Content-Length header");
      }
      content_length = &h;
    }
  }
  RequestFraming framing;
  if (transfer_encoding != nullptr) {
    if (content_length != nullptr) {
      return Framing(
          "both Content-Length and Transfer-Encoding (the server and the proxy could frame the "
          "body differently)");
    }
    if (head.minor_version == 0) {
      return Framing("Transfer-Encoding in an HTTP/1.0 request");
    }
    if (!absl::EqualsIgnoreCase(transfer_encoding->value, "chunked")) {
      return Framing(absl::StrCat("Transfer-Encoding '", QuoteForLog(transfer_encoding->value),
                                  "': only 'chunked' is accepted"));
    }
    framing.kind = RequestFraming::Kind::kChunked;
    return framing;
  }
  if (content_length != nullptr) {
    absl::string_view v = content_length->value;
    if (!IsDigits(v) || v.size() > kMaxLengthDigits || !absl::SimpleAtoi(v, &framing.length)) {
      return Framing(
          absl::StrCat("Content-Length '", QuoteForLog(v), "' is not a single decimal number"));
    }
    framing.kind = RequestFraming::Kind::kLength;
  }
  return framing;
}

HttpRequestStream::HttpRequestStream(OnHead on_head) : on_head_(std::move(on_head)) {}
HttpRequestStream::~HttpRequestStream() = default;

absl::Status HttpRequestStream::Stop(absl::Status status) {
  stopped_ = std::move(status);
  line_.clear();
  head_.reset();
  return stopped_;
}

absl::Status HttpRequestStream::Feed(absl::string_view data, std::string* up) {
  if (!stopped_.ok()) {
    return stopped_;
  }
  while (!data.empty()) {
    if (absl::Status s = Step(data, up); !s.ok()) {
      return Stop(std::move(s));
    }
  }
  return absl::OkStatus();
}

absl::Status HttpRequestStream::Step(absl::string_view& data, std::string* up) {
  switch (state_) {
    case State::kHead:
      return HeadBytes(data, up);
    case State::kBody:
    case State::kChunkData: {
      size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
      up->append(data.data(), n);
      data.remove_prefix(n);
      remaining_ -= n;
      if (remaining_ == 0) {
        state_ = state_ == State::kBody ? State::kHead : State::kChunkDataEnd;
      }
      return absl::OkStatus();
    }
    case State::kChunkDataEnd: {
      line_.push_back(data.front());
      data.remove_prefix(1);
      if (line_.size() < 2) {
        return absl::OkStatus();
      }
      if (line_ != "\r\n") {
        return Framing("chunk data is not followed by CRLF (chunk size does not match)");
      }
      up->append(line_);
      line_.clear();
      state_ = State::kChunkLine;
      return absl::OkStatus();
    }
    case State::kChunkLine:
      return ChunkLine(data, up);
    case State::kTrailers:
      return Trailers(data, up);
  }
  return absl::InternalError("bad HTTP stream state");
}

absl::Status HttpRequestStream::HeadBytes(absl::string_view& data, std::string* up) {
  if (head_ == nullptr) {
    head_ = std::make_unique<HttpRequestHeadParser>();
  }
  size_t before = head_->bytes().size();
  const HttpSniff& sniff = head_->Feed(data);
  switch (sniff.result) {
    case HttpSniffResult::kNeedMore:
      data = {};
      return absl::OkStatus();
    case HttpSniffResult::kNotHttp:
      return absl::InvalidArgumentError(
          absl::StrCat("refused HTTP request: request ", requests_ + 1,
                       " on this connection is not an HTTP/1.x request (", sniff.reason, ")"));
    case HttpSniffResult::kInvalid:
      return absl::InvalidArgumentError(sniff.reason);
    case HttpSniffResult::kHttp:
      break;
  }
  const HttpRequestHead& head = sniff.head;
  data.remove_prefix(head.head_size - before);
  absl::StatusOr<RequestFraming> framing = CheckRequestFraming(head);
  if (!framing.ok()) {
    return framing.status();
  }
  absl::StatusOr<std::string> out =
      on_head_(head, absl::string_view(head_->bytes()).substr(0, head.head_size));
  if (!out.ok()) {
    return out.status();
  }
  up->append(*out);
  ++requests_;
  head_.reset();
  switch (framing->kind) {
    case RequestFraming::Kind::kNone:
      state_ = State::kHead;
      break;
    case RequestFraming::Kind::kLength:
      remaining_ = framing->length;
      state_ = remaining_ == 0 ? State::kHead : State::kBody;
      break;
    case RequestFraming::Kind::kChunked:
      state_ = State::kChunkLine;
      break;
  }
  return absl::OkStatus();
}

// chunk-size [ ";" chunk-ext ] CRLF, strictly: hex digits, then CRLF or ';' and visible
// characters (no whitespace before ';', no bare CR or LF).
absl::Status HttpRequestStream::ChunkLine(absl::string_view& data, std::string* up) {
  size_t lf = data.find('\n');
  size_t take = lf == absl::string_view::npos ? data.size() : lf + 1;
  if (line_.size() + take > kMaxChunkLineSize) {
    return Framing(absl::StrCat("chunk-size line longer than ", kMaxChunkLineSize, " bytes"));
  }
  line_.append(data.data(), take);
  data.remove_prefix(take);
  if (lf == absl::string_view::npos) {
    return absl::OkStatus();
  }
  absl::string_view line = line_;
  if (line.size() < 2 || line[line.size() - 2] != '\r') {
    return Framing("chunk-size line ends in a bare LF");
  }
  line.remove_suffix(2);
  size_t digits = 0;
  while (digits < line.size() && absl::ascii_isxdigit(static_cast<unsigned char>(line[digits]))) {
    ++digits;
  }
  absl::string_view ext = line.substr(digits);
  bool ext_ok =
      ext.empty() || (ext.front() == ';' && std::all_of(ext.begin(), ext.end(), [](char c) {
                        unsigned char u = static_cast<unsigned char>(c);
                        return (u >= 0x20 && u < 0x7f) || c == '\t';
                      }));
  uint64_t size = 0;
  if (digits == 0 || digits > kMaxChunkSizeDigits || !ext_ok ||
      !absl::SimpleHexAtoi(line.substr(0, digits), &size)) {
    return Framing(absl::StrCat("bad chunk-size line '", QuoteForLog(line), "'"));
  }
  up->append(line_);
  line_.clear();
  if (size == 0) {
    state_ = State::kTrailers;
  } else {
    remaining_ = size;
    state_ = State::kChunkData;
  }
  return absl::OkStatus();
}

// The trailer section after the last chunk: field lines, then an empty line. Forwarded once
// complete and checked.
absl::Status HttpRequestStream::Trailers(absl::string_view& data, std::string* up) {
  size_t lf = data.find('\n');
  size_t take = lf == absl::string_view::npos ? data.size() : lf + 1;
  if (line_.size() + take > kMaxTrailerSize) {
    return Framing(absl::StrCat("trailer section longer than ", kMaxTrailerSize, " bytes"));
  }
  size_t line_start = line_.rfind('\n');
  line_start = line_start == std::string::npos ? 0 : line_start + 1;
  line_.append(data.data(), take);
  data.remove_prefix(take);
  if (lf == absl::string_view::npos) {
    return absl::OkStatus();
  }
  absl::string_view line = absl::string_view(line_).substr(line_start);
  if (line.size() < 2 || line[line.size() - 2] != '\r') {
    return Framing("trailer line ends in a bare LF");
  }
  line.remove_suffix(2);
  if (absl::StrContains(line, '\r') || absl::StrContains(line, '\0')) {
    return Framing("bare CR or NUL in a trailer line");
  }
  if (!line.empty()) {
    if (!IsFieldLine(line)) {
      return Framing(absl::StrCat("bad trailer line '", QuoteForLog(line), "'"));
    }
    return absl::OkStatus();
  }
  up->append(line_);
  line_.clear();
  state_ = State::kHead;
  return absl::OkStatus();
}

}  // namespace abox::net
