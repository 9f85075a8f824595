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

absl::Status Framing(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("refused HTTP request: ", why));
}

bool IsDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
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

absl::Status RequestBodyInspector::OnFraming(absl::string_view /*bytes*/) {
  return absl::OkStatus();
}
absl::Status RequestBodyInspector::OnEnd() { return absl::OkStatus(); }
bool RequestBodyInspector::holding() const { return false; }

HttpRequestStream::HttpRequestStream(OnHead on_head)
    : on_request_(
          [on_head = std::move(on_head)](const HttpRequestHead& head,
                                         absl::string_view raw) -> absl::StatusOr<RequestDecision> {
            absl::StatusOr<std::string> bytes = on_head(head, raw);
            if (!bytes.ok()) {
              return bytes.status();
            }
            RequestDecision decision;
            decision.head = *std::move(bytes);
            return decision;
          }) {}
HttpRequestStream::HttpRequestStream(OnRequest on_request) : on_request_(std::move(on_request)) {}
HttpRequestStream::~HttpRequestStream() = default;

absl::Status HttpRequestStream::Stop(absl::Status status) {
  stopped_ = std::move(status);
  head_.reset();
  chunked_.reset();
  inspector_.reset();
  held_.clear();
  held_.shrink_to_fit();
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

absl::Status HttpRequestStream::Emit(absl::string_view bytes, std::string* up) {
  if (inspector_ != nullptr && inspector_->holding()) {
    if (held_.size() + bytes.size() > kMaxHeldRequestSize) {
      return absl::PermissionDeniedError(absl::StrCat(
          "refused HTTP request: more than ", kMaxHeldRequestSize,
          " bytes before the proxy could check it (a git push's ref list must come first)"));
    }
    held_.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  if (!held_.empty()) {
    up->append(held_);
    held_.clear();
  }
  up->append(bytes.data(), bytes.size());
  return absl::OkStatus();
}

absl::Status HttpRequestStream::EndRequest(std::string* up) {
  state_ = State::kHead;
  chunked_.reset();
  if (inspector_ == nullptr) {
    return absl::OkStatus();
  }
  absl::Status status = inspector_->OnEnd();
  inspector_.reset();
  if (!status.ok()) {
    return status;
  }
  up->append(held_);
  held_.clear();
  return absl::OkStatus();
}

absl::Status HttpRequestStream::Step(absl::string_view& data, std::string* up) {
  switch (state_) {
    case State::kHead:
      return HeadBytes(data, up);
    case State::kBody: {
      size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
      absl::string_view body = data.substr(0, n);
      data.remove_prefix(n);
      remaining_ -= n;
      if (inspector_ != nullptr) {
        if (absl::Status s = inspector_->OnBody(body); !s.ok()) {
          return s;
        }
      }
      if (absl::Status s = Emit(body, up); !s.ok()) {
        return s;
      }
      return remaining_ == 0 ? EndRequest(up) : absl::OkStatus();
    }
    case State::kChunked:
      return Chunked(data, up);
  }
  return absl::InternalError("bad HTTP stream state");
}

absl::Status HttpRequestStream::Chunked(absl::string_view& data, std::string* up) {
  absl::StatusOr<std::optional<ChunkedBodyReader::Piece>> next = chunked_->Next(&data);
  if (!next.ok()) {
    return next.status();
  }
  if (!next->has_value()) {
    return absl::OkStatus();
  }
  const ChunkedBodyReader::Piece& piece = **next;
  absl::Status status;
  if (inspector_ != nullptr) {
    switch (piece.part) {
      case ChunkedBodyReader::Part::kData:
        status = inspector_->OnBody(piece.bytes);
        break;
      case ChunkedBodyReader::Part::kSizeLine:
      case ChunkedBodyReader::Part::kLastChunk:
      case ChunkedBodyReader::Part::kTrailers:
        status = inspector_->OnFraming(piece.bytes);
        break;
      case ChunkedBodyReader::Part::kDataEnd:
        break;
    }
  }
  if (status.ok()) {
    status = Emit(piece.bytes, up);
  }
  if (status.ok() && piece.part == ChunkedBodyReader::Part::kTrailers) {
    status = EndRequest(up);
  }
  return status;
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
  absl::StatusOr<RequestDecision> decision =
      on_request_(head, absl::string_view(head_->bytes()).substr(0, head.head_size));
  if (!decision.ok()) {
    return decision.status();
  }
  ++requests_;
  head_.reset();
  inspector_ = std::move(decision->inspector);
  if (absl::Status s = Emit(decision->head, up); !s.ok()) {
    return s;
  }
  switch (framing->kind) {
    case RequestFraming::Kind::kNone:
      return EndRequest(up);
    case RequestFraming::Kind::kLength:
      remaining_ = framing->length;
      if (remaining_ == 0) {
        return EndRequest(up);
      }
      state_ = State::kBody;
      break;
    case RequestFraming::Kind::kChunked:
      chunked_ = std::make_unique<ChunkedBodyReader>(
          ChunkedBodyReader::Options{.error_prefix = "refused HTTP request: "});
      state_ = State::kChunked;
      break;
  }
  return absl::OkStatus();
}

}  // namespace abox::net
