#include "src/net/http_response_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

// Content-Length of up to 18 digits fits in uint64_t without overflow checks.
constexpr size_t kMaxLengthDigits = 18;

absl::Status Bad(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("bad response from the upstream: ", why));
}

// "HTTP/1.d SP 3DIGIT [SP reason-phrase]": the space before an empty reason is optional in
// practice (servers omit it).
absl::Status ParseStatusLine(absl::string_view line, HttpResponseHead* head) {
  if (line.size() < 12 || !absl::StartsWith(line, "HTTP/1.") ||
      !absl::ascii_isdigit(static_cast<unsigned char>(line[7])) || line[8] != ' ' ||
      !std::all_of(line.begin() + 9, line.begin() + 12,
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
      (line.size() > 12 && line[12] != ' ')) {
    return Bad(absl::StrCat("status line '", QuoteForLog(line), "' is not HTTP/1.x"));
  }
  absl::string_view reason = line.size() > 12 ? line.substr(13) : absl::string_view();
  if (std::any_of(reason.begin(), reason.end(), [](char c) {
        unsigned char u = static_cast<unsigned char>(c);
        return (u < 0x20 && c != '\t') || u == 0x7f;
      })) {
    return Bad("control byte in the status line");
  }
  head->minor_version = line[7] - '0';
  head->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
  if (head->status < 100) {
    return Bad(absl::StrCat("status ", head->status, " is not a status code"));
  }
  head->reason = std::string(reason);
  return absl::OkStatus();
}

bool IsHeader(const HttpHeader& h, absl::string_view name) {
  return absl::EqualsIgnoreCase(h.name, name);
}

}  // namespace

absl::StatusOr<HttpResponseHead> ParseHttpResponseHead(absl::string_view bytes) {
  if (!absl::EndsWith(bytes, "\r\n\r\n") || bytes.find("\r\n\r\n") != bytes.size() - 4) {
    return Bad("the head does not end in one blank line");
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    char c = bytes[i];
    if (c == '\0') {
      return Bad("NUL byte in the head");
    }
    if (c == '\r' && bytes[i + 1] != '\n') {  // the head ends in LF: i + 1 is in range
      return Bad("bare CR in the head");
    }
    if (c == '\n' && (i == 0 || bytes[i - 1] != '\r')) {
      return Bad("bare LF in the head");
    }
  }
  HttpResponseHead head;
  head.head_size = bytes.size();
  size_t line_end = bytes.find("\r\n");
  if (absl::Status s = ParseStatusLine(bytes.substr(0, line_end), &head); !s.ok()) {
    return s;
  }
  absl::string_view block = bytes.substr(line_end + 2, bytes.size() - 2 - (line_end + 2));
  if (absl::Status s = ParseHeaderLines(block, kMaxResponseHeaders, &head.headers); !s.ok()) {
    return Bad(s.message());
  }
  return head;
}

absl::StatusOr<ResponseFraming> CheckResponseFraming(const HttpResponseHead& head,
                                                     const PendingRequest& request) {
  ResponseFraming framing;
  if (head.status == 101) {
    framing.kind = ResponseFraming::Kind::kSwitched;
    return framing;
  }
  if (head.status < 200 || head.status == 204 || head.status == 304 || request.is_head) {
    return framing;  // kNone, whatever the headers say (RFC 9112 6.3 rules 1 and 3)
  }
  const HttpHeader* transfer_encoding = nullptr;
  const HttpHeader* content_length = nullptr;
  for (const HttpHeader& h : head.headers) {
    if (IsHeader(h, "transfer-encoding")) {
      if (transfer_encoding != nullptr) {
        return Bad("more than one Transfer-Encoding header");
      }
      transfer_encoding = &h;
    } else if (IsHeader(h, "content-length")) {
      if (content_length != nullptr) {
        return Bad("more than one Content-Length header");
      }
      content_length = &h;
    }
  }
  if (transfer_encoding != nullptr) {
    if (content_length != nullptr) {
      return Bad("both Content-Length and Transfer-Encoding (a smuggling attempt, or a bug)");
    }
    std::vector<absl::string_view> codings = absl::StrSplit(transfer_encoding->value, ',');
    framing.kind = absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(codings.back()), "chunked")
                       ? ResponseFraming::Kind::kChunked
                       : ResponseFraming::Kind::kClose;
    return framing;
  }
  if (content_length != nullptr) {
    absl::string_view v = content_length->value;
    if (v.empty() || v.size() > kMaxLengthDigits ||
        !std::all_of(v.begin(), v.end(),
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
        !absl::SimpleAtoi(v, &framing.length)) {
      return Bad(absl::StrCat("Content-Length '", QuoteForLog(v), "' is not a decimal number"));
    }
    framing.kind = ResponseFraming::Kind::kLength;
    return framing;
  }
  framing.kind = ResponseFraming::Kind::kClose;
  return framing;
}

HttpResponseStream::HttpResponseStream(ChooseScrubber choose) : choose_(std::move(choose)) {}
HttpResponseStream::~HttpResponseStream() = default;

bool HttpResponseStream::ExpectResponse(PendingRequest request) {
  if (pending_.size() >= kMaxPendingResponses) {
    return false;
  }
  pending_.push_back(request);
  return true;
}

uint64_t HttpResponseStream::replacements() const {
  uint64_t n = replacements_;
  if (scrubber_) {
    n += scrubber_->replacements();
  }
  if (chunked_) {
    n += chunked_->scrubber().replacements();
  }
  return n;
}

absl::Status HttpResponseStream::Stop(absl::Status status) {
  stopped_ = std::move(status);
  head_.clear();
  CountBody();
  return stopped_;
}

void HttpResponseStream::CountBody() {
  if (scrubber_) {
    replacements_ += scrubber_->replacements();
    scrubber_.reset();
  }
  if (chunked_) {
    replacements_ += chunked_->scrubber().replacements();
    chunked_.reset();
  }
}

absl::Status HttpResponseStream::Feed(absl::string_view data, std::string* down) {
  if (!stopped_.ok()) {
    return stopped_;
  }
  while (!data.empty()) {
    if (absl::Status s = Step(data, down); !s.ok()) {
      return Stop(std::move(s));
    }
  }
  return absl::OkStatus();
}

absl::Status HttpResponseStream::Finish(std::string* down) {
  if (!stopped_.ok()) {
    return stopped_;
  }
  switch (state_) {
    case State::kHead:
      if (!head_.empty()) {
        return Stop(Bad("the upstream closed the connection in the middle of a response head"));
      }
      break;
    case State::kUntilClose:
      if (scrubber_) {
        scrubber_->Finish(down);
      }
      EndObserved();
      break;
    case State::kLength:
    case State::kChunked:
      return Stop(Bad("the upstream closed the connection in the middle of a response body"));
    case State::kEnded:
      break;
  }
  CountBody();
  state_ = State::kEnded;
  return absl::OkStatus();
}

absl::Status HttpResponseStream::Step(absl::string_view& data, std::string* down) {
  switch (state_) {
    case State::kHead:
      return HeadBytes(data, down);
    case State::kLength: {
      size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
      Body(data.substr(0, n), down);
      data.remove_prefix(n);
      remaining_ -= n;
      if (remaining_ == 0) {
        EndLengthBody(down);
      }
      return absl::OkStatus();
    }
    case State::kChunked: {
      absl::StatusOr<size_t> used = chunked_->Feed(data, down);
      if (!used.ok()) {
        return used.status();
      }
      data.remove_prefix(*used);
      if (chunked_->done()) {
        EndObserved();
        CountBody();
        state_ = State::kHead;
      }
      return absl::OkStatus();
    }
    case State::kUntilClose:
      Body(data, down);
      data = {};
      return absl::OkStatus();
    case State::kEnded:
      return Bad(
          "bytes after a response that ends the connection (an HTTP/1.0 client's, re-framed to "
          "end at close)");
  }
  return absl::InternalError("bad HTTP response stream state");
}

// Body bytes of a Content-Length or close-delimited body.
void HttpResponseStream::Body(absl::string_view data, std::string* down) {
  if (observer_ != nullptr && !data.empty()) {
    observer_->OnResponseBody(data);
  }
  if (!scrubber_) {
    down->append(data.data(), data.size());
    return;
  }
  if (reframe_ != Reframe::kToChunked) {
    scrubber_->Feed(data, down);
    return;
  }
  scratch_.clear();
  scrubber_->Feed(data, &scratch_);
  AppendChunk(scratch_, down);
}

void HttpResponseStream::EndObserved() {
  if (observer_ != nullptr) {
    observer_->OnResponseEnd();
  }
}

void HttpResponseStream::EndLengthBody(std::string* down) {
  if (scrubber_) {
    scratch_.clear();
    scrubber_->Finish(&scratch_);
    if (reframe_ == Reframe::kToChunked) {
      AppendChunk(scratch_, down);
      down->append("0\r\n\r\n");
    } else {
      down->append(scratch_);
    }
  }
  EndObserved();
  CountBody();
  state_ = reframe_ == Reframe::kToClose ? State::kEnded : State::kHead;
}

absl::Status HttpResponseStream::HeadBytes(absl::string_view& data, std::string* down) {
  size_t before = head_.size();
  size_t take = std::min(data.size(), kMaxResponseHeadSize - before);
  head_.append(data.data(), take);
  size_t end = head_.find("\r\n\r\n", before >= 3 ? before - 3 : 0);
  if (end == std::string::npos) {
    data.remove_prefix(take);
    if (head_.size() >= kMaxResponseHeadSize) {
      return Bad(absl::StrCat("response head longer than ", kMaxResponseHeadSize, " bytes"));
    }
    return absl::OkStatus();
  }
  head_.resize(end + 4);
  data.remove_prefix(head_.size() - before);
  absl::StatusOr<HttpResponseHead> head = ParseHttpResponseHead(head_);
  if (!head.ok()) {
    return head.status();
  }
  absl::Status status = StartResponse(*head, down);
  head_.clear();
  return status;
}

absl::Status HttpResponseStream::StartResponse(const HttpResponseHead& head, std::string* down) {
  bool interim = head.status < 200 && head.status != 101;
  PendingRequest request;
  if (!pending_.empty()) {
    request = pending_.front();
    if (!interim) {
      pending_.pop_front();
    }
  }
  absl::StatusOr<ResponseFraming> framing = CheckResponseFraming(head, request);
  if (!framing.ok()) {
    return framing.status();
  }
  std::optional<ValueScrubber> scrubber;
  if (choose_) {
    scrubber = choose_(head, request);
  }
  reframe_ = Reframe::kNone;
  if (framing->kind == ResponseFraming::Kind::kLength && framing->length > 0 && scrubber &&
      scrubber->changes_length()) {
    reframe_ = request.minor_version >= 1 ? Reframe::kToChunked : Reframe::kToClose;
  }
  std::string text;
  if (reframe_ == Reframe::kNone) {
    text = head_;
  } else {
    text = head_.substr(0, head_.find("\r\n") + 2);
    for (const HttpHeader& h : head.headers) {
      if (IsHeader(h, "content-length") ||
          (reframe_ == Reframe::kToClose &&
           (IsHeader(h, "connection") || IsHeader(h, "keep-alive")))) {
        continue;
      }
      absl::StrAppend(&text, h.name, ": ", h.value, "\r\n");
    }
    // The scrubbed body's length is not known before it has all been read.
    text.append(reframe_ == Reframe::kToChunked ? "Transfer-Encoding: chunked\r\n\r\n"
                                                : "Connection: close\r\n\r\n");
  }
  if (scrubber) {
    // Values hold no CR or LF: the head keeps its lines.
    ValueScrubber head_scrubber = *scrubber;
    head_scrubber.Feed(text, down);
    head_scrubber.Finish(down);
    replacements_ += head_scrubber.replacements();
  } else {
    down->append(text);
  }
  if (!interim) {
    ++responses_;
    if (observer_ != nullptr) {
      observer_->OnResponseHead(head, request);
    }
  }
  switch (framing->kind) {
    case ResponseFraming::Kind::kNone:
      if (!interim) {
        EndObserved();
      }
      state_ = State::kHead;
      break;
    case ResponseFraming::Kind::kLength:
      scrubber_ = std::move(scrubber);
      remaining_ = framing->length;
      state_ = State::kLength;
      if (remaining_ == 0) {
        EndLengthBody(down);
      }
      break;
    case ResponseFraming::Kind::kChunked: {
      if (!scrubber) {
        absl::StatusOr<ValueScrubber> none = ValueScrubber::Create({});
        if (!none.ok()) {
          return none.status();
        }
        scrubber = *std::move(none);
      }
      chunked_.emplace(*std::move(scrubber));
      if (observer_ != nullptr) {
        chunked_->ObserveData([this](absl::string_view data) { observer_->OnResponseBody(data); });
      }
      state_ = State::kChunked;
      break;
    }
    case ResponseFraming::Kind::kClose:
    case ResponseFraming::Kind::kSwitched:
      scrubber_ = std::move(scrubber);
      state_ = State::kUntilClose;
      break;
  }
  return absl::OkStatus();
}

}  // namespace abox::net
