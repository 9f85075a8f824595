#include "src/net/chunked_body.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

// A chunk size of up to 15 hex digits (< 2^60): more is not a body anyone sends.
constexpr size_t kMaxChunkSizeDigits = 15;

bool IsTchar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

// One trailer field line without its CRLF (RFC 9112 7.1.2: field lines as in a head; no
// obs-fold, no bare CR, no control bytes).
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

// Moves up to the next LF (included) from `*data` to `*line`; true once the LF is there.
bool TakeLine(absl::string_view* data, std::string* line) {
  size_t lf = data->find('\n');
  size_t take = lf == absl::string_view::npos ? data->size() : lf + 1;
  line->append(data->data(), take);
  data->remove_prefix(take);
  return lf != absl::string_view::npos;
}

}  // namespace

void AppendChunk(absl::string_view data, std::string* out) {
  if (data.empty()) {
    return;
  }
  absl::StrAppend(out, absl::StrFormat("%x", data.size()), "\r\n", data, "\r\n");
}

absl::Status ChunkedBodyReader::Error(absl::string_view why) {
  error_ = absl::InvalidArgumentError(absl::StrCat(options_.error_prefix, why));
  line_.clear();
  return error_;
}

absl::StatusOr<std::optional<ChunkedBodyReader::Piece>> ChunkedBodyReader::Next(
    absl::string_view* data) {
  if (!error_.ok()) {
    return error_;
  }
  while (!data->empty()) {
    switch (state_) {
      case State::kSizeLine:
        return SizeLine(data);
      case State::kData: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data->size()));
        Piece piece{Part::kData, data->substr(0, n)};
        data->remove_prefix(n);
        remaining_ -= n;
        if (remaining_ == 0) {
          state_ = State::kDataEnd;
        }
        return piece;
      }
      case State::kDataEnd:
        line_.push_back(data->front());
        data->remove_prefix(1);
        if (line_.size() < 2) {
          break;
        }
        if (line_ != "\r\n") {
          return Error("chunk data is not followed by CRLF (chunk size does not match)");
        }
        piece_.swap(line_);
        line_.clear();
        state_ = State::kSizeLine;
        return Piece{Part::kDataEnd, piece_};
      case State::kTrailers:
        return Trailers(data);
      case State::kDone:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

// chunk-size [ ";" chunk-ext ] CRLF: hex digits, then CRLF or ';' and visible characters (no
// bare CR or LF).
absl::StatusOr<std::optional<ChunkedBodyReader::Piece>> ChunkedBodyReader::SizeLine(
    absl::string_view* data) {
  bool complete = TakeLine(data, &line_);
  if (line_.size() > kMaxChunkLineSize) {
    return Error(absl::StrCat("chunk-size line longer than ", kMaxChunkLineSize, " bytes"));
  }
  if (!complete) {
    return std::nullopt;
  }
  absl::string_view line = line_;
  if (line.size() < 2 || line[line.size() - 2] != '\r') {
    return Error("chunk-size line ends in a bare LF");
  }
  line.remove_suffix(2);
  size_t digits = 0;
  while (digits < line.size() && absl::ascii_isxdigit(static_cast<unsigned char>(line[digits]))) {
    ++digits;
  }
  absl::string_view ext = line.substr(digits);
  if (options_.whitespace_before_extension) {
    ext = absl::StripLeadingAsciiWhitespace(ext);
  }
  bool ext_ok =
      ext.empty() || (ext.front() == ';' && std::all_of(ext.begin(), ext.end(), [](char c) {
                        unsigned char u = static_cast<unsigned char>(c);
                        return (u >= 0x20 && u < 0x7f) || c == '\t';
                      }));
  uint64_t size = 0;
  if (digits == 0 || digits > kMaxChunkSizeDigits || !ext_ok ||
      !absl::SimpleHexAtoi(line.substr(0, digits), &size)) {
    return Error(absl::StrCat("bad chunk-size line '", QuoteForLog(line), "'"));
  }
  piece_.swap(line_);
  line_.clear();
  if (size == 0) {
    state_ = State::kTrailers;
    return Piece{Part::kLastChunk, piece_};
  }
  remaining_ = size;
  state_ = State::kData;
  return Piece{Part::kSizeLine, piece_};
}

// The trailer section after the last chunk: field lines, then an empty line. Handed out once
// complete and checked.
absl::StatusOr<std::optional<ChunkedBodyReader::Piece>> ChunkedBodyReader::Trailers(
    absl::string_view* data) {
  while (!data->empty()) {
    bool complete = TakeLine(data, &line_);
    if (line_.size() > kMaxTrailerSize) {
      return Error(absl::StrCat("trailer section longer than ", kMaxTrailerSize, " bytes"));
    }
    if (!complete) {
      return std::nullopt;
    }
    if (line_.size() < 2) {
      return Error("trailer line ends in a bare LF");
    }
    // The line may have been started by an earlier call: it begins after the previous LF.
    size_t prev_lf = line_.rfind('\n', line_.size() - 2);
    size_t line_start = prev_lf == std::string::npos ? 0 : prev_lf + 1;
    absl::string_view line = absl::string_view(line_).substr(line_start);
    if (line.size() < 2 || line[line.size() - 2] != '\r') {
      return Error("trailer line ends in a bare LF");
    }
    line.remove_suffix(2);
    if (absl::StrContains(line, '\r') || absl::StrContains(line, '\0')) {
      return Error("bare CR or NUL in a trailer line");
    }
    if (!line.empty()) {
      if (!IsFieldLine(line)) {
        return Error(absl::StrCat("bad trailer line '", QuoteForLog(line), "'"));
      }
      continue;
    }
    piece_.swap(line_);
    line_.clear();
    state_ = State::kDone;
    return Piece{Part::kTrailers, piece_};
  }
  return std::nullopt;
}

}  // namespace abox::net
