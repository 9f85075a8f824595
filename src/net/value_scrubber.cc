#include "src/net/value_scrubber.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/net/host_name.h"

namespace abox::net {

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
    changes_length_ = changes_length_ || p.value.size() != p.placeholder.size();
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

ChunkedScrubber::ChunkedScrubber(ValueScrubber scrubber)
    : scrubber_(std::move(scrubber)),
      reader_(ChunkedBodyReader::Options{.error_prefix = "bad chunked response body: ",
                                         .whitespace_before_extension = true}) {}

absl::StatusOr<size_t> ChunkedScrubber::Feed(absl::string_view data, std::string* out) {
  size_t size = data.size();
  while (!data.empty() && !reader_.done()) {
    absl::StatusOr<std::optional<ChunkedBodyReader::Piece>> next = reader_.Next(&data);
    if (!next.ok()) {
      return next.status();
    }
    if (!next->has_value()) {
      continue;
    }
    const ChunkedBodyReader::Piece& piece = **next;
    scratch_.clear();
    switch (piece.part) {
      case ChunkedBodyReader::Part::kSizeLine:
      case ChunkedBodyReader::Part::kDataEnd:
        break;  // new chunks are written around the scrubbed data
      case ChunkedBodyReader::Part::kData:
        if (on_data_) {
          on_data_(piece.bytes);
        }
        scrubber_.Feed(piece.bytes, &scratch_);
        AppendChunk(scratch_, out);
        break;
      case ChunkedBodyReader::Part::kLastChunk:
        scrubber_.Finish(&scratch_);
        AppendChunk(scratch_, out);
        out->append("0\r\n");
        break;
      case ChunkedBodyReader::Part::kTrailers:
        // A trailer is a header too: an echoed value there is hidden like in the data. Values
        // hold no CR or LF, so the lines stay lines.
        scrubber_.Feed(piece.bytes, &scratch_);
        scrubber_.Finish(&scratch_);
        out->append(scratch_);
        break;
    }
  }
  return size - data.size();
}

}  // namespace abox::net
