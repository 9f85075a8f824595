#include "src/net/leak_detector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace abox::net {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') {
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

// A code unit from \uXXXX as UTF-8 (a lone surrogate becomes its 3-byte form: it matches no
// needle that is valid UTF-8, and no placeholder, which is ASCII).
void AppendUtf8(uint32_t code, std::string* out) {
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (code >> 6)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xe0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3f)));
  }
}

// The characters of base64(filler + needle) that depend on the needle's bytes only, with
// `shift` filler bytes in front: this is what the needle looks like inside any longer base64
// text in which it starts at an offset of `shift` modulo 3.
std::string StableBase64(absl::string_view needle, size_t shift) {
  std::string shifted(shift, '\0');
  shifted.append(needle.data(), needle.size());
  std::string encoded;
  absl::Base64Escape(shifted, &encoded);
  size_t first = (8 * shift + 5) / 6;              // first char with no filler bits
  size_t end = (8 * (shift + needle.size())) / 6;  // chars entirely within the needle
  return encoded.substr(first, end - first);
}

std::string ToUrlSafe(std::string base64) {
  for (char& c : base64) {
    if (c == '+') {
      c = '-';
    } else if (c == '/') {
      c = '_';
    }
  }
  return base64;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const LeakPatterns>> LeakPatterns::Create(
    std::vector<Needle> needles) {
  if (needles.size() > kMaxNeedles) {
    return absl::InvalidArgumentError(absl::StrCat("too many secrets to watch for (",
                                                   needles.size(), "; at most ", kMaxNeedles, ")"));
  }
  std::shared_ptr<LeakPatterns> patterns(new LeakPatterns());
  for (size_t i = 0; i < needles.size(); ++i) {
    const Needle& needle = needles[i];
    if (needle.name.empty()) {
      return absl::InvalidArgumentError("a watched secret has no name");
    }
    if (needle.bytes.size() < kMinNeedleSize || needle.bytes.size() > kMaxNeedleSize) {
      return absl::InvalidArgumentError(absl::StrCat("the text to watch for of secret '",
                                                     needle.name, "' must be ", kMinNeedleSize,
                                                     " to ", kMaxNeedleSize, " bytes long"));
    }
    std::vector<Pattern> mine = {{i, needle.bytes, "raw"}};
    for (size_t shift = 0; shift < 3; ++shift) {
      std::string standard = StableBase64(needle.bytes, shift);
      std::string url_safe = ToUrlSafe(standard);
      if (url_safe != standard) {
        mine.push_back({i, std::move(url_safe), "base64url"});
      }
      mine.push_back({i, std::move(standard), "base64"});
    }
    for (Pattern& p : mine) {
      patterns->max_pattern_size_ = std::max(patterns->max_pattern_size_, p.bytes.size());
      patterns->patterns_.push_back(std::move(p));
    }
  }
  patterns->needles_ = std::move(needles);
  return std::shared_ptr<const LeakPatterns>(std::move(patterns));
}

void LeakDetector::Decoder::Decode(absl::string_view in, std::string* out) {
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (pending.empty()) {
      if ((kind == Kind::kPercent && c == '%') || (kind == Kind::kJson && c == '\\')) {
        pending.push_back(c);
      } else {
        out->push_back(c);
      }
      continue;
    }
    if (kind == Kind::kPercent) {
      if (HexValue(c) < 0) {
        // Not an escape after all: the '%' (and a hex digit) pass through, `c` starts over.
        out->append(pending);
        pending.clear();
        --i;
        continue;
      }
      pending.push_back(c);
      if (pending.size() == 3) {
        out->push_back(static_cast<char>(HexValue(pending[1]) * 16 + HexValue(pending[2])));
        pending.clear();
      }
      continue;
    }
    // JSON: pending is "\" or "\u" plus up to 3 hex digits.
    if (pending.size() == 1) {
      static constexpr absl::string_view kFrom = "\"\\/bfnrt";
      static constexpr absl::string_view kTo = "\"\\/\b\f\n\r\t";
      if (c == 'u') {
        pending.push_back(c);
      } else if (size_t k = kFrom.find(c); k != absl::string_view::npos) {
        out->push_back(kTo[k]);
        pending.clear();
      } else {
        out->append(pending);
        pending.clear();
        --i;
      }
      continue;
    }
    if (HexValue(c) < 0) {
      out->append(pending);
      pending.clear();
      --i;
      continue;
    }
    pending.push_back(c);
    if (pending.size() == 6) {
      uint32_t code = 0;
      for (size_t k = 2; k < 6; ++k) {
        code = code * 16 + static_cast<uint32_t>(HexValue(pending[k]));
      }
      AppendUtf8(code, out);
      pending.clear();
    }
  }
}

LeakDetector::LeakDetector(std::shared_ptr<const LeakPatterns> patterns)
    : patterns_(std::move(patterns)) {
  using Kind = Decoder::Kind;
  views_.push_back({"", {}, {}});
  views_.push_back({"percent-encoded", {{Kind::kPercent, {}}}, {}});
  views_.push_back({"JSON-escaped", {{Kind::kJson, {}}}, {}});
  views_.push_back(
      {"JSON-escaped and percent-encoded", {{Kind::kJson, {}}, {Kind::kPercent, {}}}, {}});
}

std::optional<Leak> LeakDetector::Feed(absl::string_view data) {
  if (leak_ || data.empty() || patterns_->patterns().empty()) {
    return leak_;
  }
  size_t keep = patterns_->max_pattern_size() - 1;
  std::string decoded;
  std::string next;
  for (View& view : views_) {
    // The tail first, so a pattern split across chunks is whole in `decoded`.
    decoded = view.tail;
    size_t fresh = decoded.size();
    // Most bodies have no escapes: then a view's new bytes are the raw bytes, and a match lying
    // wholly in them was the raw view's (first) to find.
    bool unchanged = true;
    for (const Decoder& d : view.decoders) {
      char escape = d.kind == Decoder::Kind::kPercent ? '%' : '\\';
      unchanged = unchanged && d.pending.empty() && data.find(escape) == absl::string_view::npos;
    }
    if (unchanged) {
      decoded.append(data.data(), data.size());
    } else {
      std::string in(data);
      for (size_t d = 0; d < view.decoders.size(); ++d) {
        next.clear();
        view.decoders[d].Decode(in, &next);
        in.swap(next);
      }
      decoded.append(in);
    }
    if (decoded.size() == fresh) {
      continue;  // the bytes are all inside an unfinished escape
    }
    absl::string_view window = decoded;
    if (unchanged && !view.decoders.empty()) {
      window = window.substr(0, fresh + keep);  // matches that begin in the tail
    }
    for (const LeakPatterns::Pattern& p : patterns_->patterns()) {
      // Only matches that end in the new bytes: older ones were looked for before.
      size_t from = fresh >= p.bytes.size() ? fresh - p.bytes.size() + 1 : 0;
      if (window.find(p.bytes, from) == absl::string_view::npos) {
        continue;
      }
      std::string encoding(p.form);
      if (!view.name.empty()) {
        encoding = p.form == "raw" ? std::string(view.name) : absl::StrCat(view.name, " ", p.form);
      }
      leak_ = Leak{patterns_->needles()[p.needle].name, std::move(encoding)};
      return leak_;
    }
    view.tail = decoded.substr(decoded.size() - std::min(keep, decoded.size()));
  }
  return std::nullopt;
}

}  // namespace abox::net
