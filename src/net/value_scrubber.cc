#include "src/net/value_scrubber.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/net/host_name.h"
#include "src/net/http_request_stream.h"

namespace abox::net {
namespace {

// As on the request side (http_request_stream.h): more is not a body a server sends.
constexpr size_t kMaxChunkSizeDigits = 15;

absl::Status Framing(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("bad chunked response body: ", why));
}

}  // namespace

absl::StatusOr<ValueScrubber> ValueScrubber::Create(std::vector<ScrubPair> pairs) {
  if (pairs.size() > kMaxScrubValues) {
    return absl::InvalidArgumentError(absl::StrCat("too many values to scrub (", pairs.size(),
                                                   "; at most ", kMaxScrubValues, ")"));
  }
  for (size_t i = 0; i < pairs.size(); ++i) {
    const ScrubPair& p = pairs[i];
    if (p.value.empty() || p.value.size() > kMaxScrubValueSize) {
      return absl::InvalidArgumentError(absl::StrCat("the value to scrub for placeholder '",
                                                     QuoteForLog(p.placeholder), "' must be 1 to ",
                                                     kMaxScrubValueSize, " bytes long"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (pairs[j].value == p.value) {
        return absl::InvalidArgumentError(
            absl::StrCat("placeholders '", QuoteForLog(pairs[j].placeholder), "' and '",
                         QuoteForLog(p.placeholder), "' stand for the same value"));
      }
    }
  }
  return ValueScrubber(std::move(pairs));
}

ValueScrubber::ValueScrubber(std::vector<ScrubPair> pairs) : pairs_(std::move(pairs)) {
  for (const ScrubPair& p : pairs_) {
    if (first_bytes_.find(p.value.front()) == std::string::npos) {
      first_bytes_.push_back(p.value.front());
    }
  }
}

int ValueScrubber::MatchAt(absl::string_view text, size_t pos, bool at_end, bool* undecided) const {
  absl::string_view rest = text.substr(pos);
  int best = -1;
  *undecided = false;
  for (size_t i = 0; i < pairs_.size(); ++i) {
    absl::string_view value = pairs_[i].value;
    if (absl::StartsWith(rest, value)) {
      if (best < 0 || value.size() > pairs_[static_cast<size_t>(best)].value.size()) {
        best = static_cast<int>(i);
      }
    } else if (!at_end && value.size() > rest.size() && absl::StartsWith(value, rest)) {
      // More bytes could complete this (longer) value: decide when they arrive.
      *undecided = true;
    }
  }
  return best;
}

void ValueScrubber::Drain(bool at_end, std::string* out) {
  absl::string_view text = pending_;
  size_t emitted = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (first_bytes_.find(text[pos]) == std::string::npos) {
      ++pos;
      continue;
    }
    bool undecided = false;
    int match = MatchAt(text, pos, at_end, &undecided);
    if (undecided) {
      break;
    }
    if (match < 0) {
      ++pos;
      continue;
    }
    const ScrubPair& pair = pairs_[static_cast<size_t>(match)];
    out->append(text.data() + emitted, pos - emitted);
    out->append(pair.placeholder);
    ++replacements_;
    pos += pair.value.size();
    emitted = pos;
  }
  out->append(text.data() + emitted, pos - emitted);
  pending_.erase(0, pos);
}

void ValueScrubber::Feed(absl::string_view data, std::string* out) {
  if (pairs_.empty()) {
    out->append(data.data(), data.size());
    return;
  }
  pending_.append(data.data(), data.size());
  Drain(/*at_end=*/false, out);
}

void ValueScrubber::Finish(std::string* out) { Drain(/*at_end=*/true, out); }

ChunkedScrubber::ChunkedScrubber(ValueScrubber scrubber) : scrubber_(std::move(scrubber)) {}

void ChunkedScrubber::EmitChunk(absl::string_view scrubbed, std::string* out) {
  // An empty chunk would be the last-chunk marker: nothing to send yet means no chunk.
  if (scrubbed.empty()) {
    return;
  }
  absl::StrAppend(out, absl::StrFormat("%x", scrubbed.size()), "\r\n", scrubbed, "\r\n");
}

absl::StatusOr<size_t> ChunkedScrubber::Feed(absl::string_view data, std::string* out) {
  if (!error_.ok()) {
    return error_;
  }
  size_t size = data.size();
  while (!data.empty() && state_ != State::kDone) {
    absl::Status status;
    switch (state_) {
      case State::kSizeLine:
        status = SizeLine(data, out);
        break;
      case State::kData: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
        scratch_.clear();
        scrubber_.Feed(data.substr(0, n), &scratch_);
        EmitChunk(scratch_, out);
        data.remove_prefix(n);
        remaining_ -= n;
        if (remaining_ == 0) {
          state_ = State::kDataEnd;
        }
        break;
      }
      case State::kDataEnd:
        line_.push_back(data.front());
        data.remove_prefix(1);
        if (line_.size() == 2) {
          if (line_ != "\r\n") {
            status = Framing("chunk data is not followed by CRLF (chunk size does not match)");
          }
          line_.clear();
          state_ = State::kSizeLine;
        }
        break;
      case State::kTrailers:
        status = Trailers(data, out);
        break;
      case State::kDone:
        break;
    }
    if (!status.ok()) {
      error_ = status;
      return error_;
    }
  }
  return size - data.size();
}

// chunk-size [ BWS ";" chunk-ext ] CRLF.
absl::Status ChunkedScrubber::SizeLine(absl::string_view& data, std::string* out) {
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
  bool ext_ok = ext.empty() || ((ext.front() == ';' || ext.front() == ' ' || ext.front() == '\t') &&
                                std::all_of(ext.begin(), ext.end(), [](char c) {
                                  unsigned char u = static_cast<unsigned char>(c);
                                  return (u >= 0x20 && u < 0x7f) || c == '\t';
                                }));
  uint64_t size = 0;
  if (digits == 0 || digits > kMaxChunkSizeDigits || !ext_ok ||
      !absl::SimpleHexAtoi(line.substr(0, digits), &size)) {
    return Framing(absl::StrCat("bad chunk-size line '", QuoteForLog(line), "'"));
  }
  line_.clear();
  if (size == 0) {
    scratch_.clear();
    scrubber_.Finish(&scratch_);
    EmitChunk(scratch_, out);
    out->append("0\r\n");
    state_ = State::kTrailers;
  } else {
    remaining_ = size;
    state_ = State::kData;
  }
  return absl::OkStatus();
}

// Trailer field lines, then an empty line; passed on once complete.
absl::Status ChunkedScrubber::Trailers(absl::string_view& data, std::string* out) {
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
  if (line.size() > 2) {
    return absl::OkStatus();
  }
  out->append(line_);
  line_.clear();
  state_ = State::kDone;
  return absl::OkStatus();
}

}  // namespace abox::net
