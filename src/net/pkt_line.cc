#include "src/net/pkt_line.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

// Side-band payload sizes after the band byte (git's LARGE_PACKET_DATA_MAX for side-band-64k,
// 1000 - 5 for the old side-band).
constexpr size_t kSideBand64kData = kMaxPktLineSize - 5;
constexpr size_t kSideBandData = 995;

absl::Status Refused(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("refused git push: ", why));
}

bool IsLowerHex(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
  });
}

// SHA-1 (40) or SHA-256 (64) hex, as git writes them (lowercase).
bool IsObjectId(absl::string_view s) { return (s.size() == 40 || s.size() == 64) && IsLowerHex(s); }

}  // namespace

absl::StatusOr<std::optional<PktLine>> PktLineReader::Next(absl::string_view* data) {
  while (header_.size() < 4) {
    if (data->empty()) {
      return std::nullopt;
    }
    header_.push_back(data->front());
    data->remove_prefix(1);
    if (header_.size() < 4) {
      continue;
    }
    uint32_t length = 0;
    if (!std::all_of(header_.begin(), header_.end(),
                     [](char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); }) ||
        !absl::SimpleHexAtoi(header_, &length)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad pkt-line length '", QuoteForLog(header_), "' (not 4 hex digits)"));
    }
    PktLine special;
    switch (length) {
      case 0:
        special.kind = PktLine::Kind::kFlush;
        break;
      case 1:
      case 2:
        if (!allow_v2_) {
          return absl::InvalidArgumentError(
              absl::StrCat("pkt-line ", header_, " (a protocol v2 marker) where none is allowed"));
        }
        special.kind = length == 1 ? PktLine::Kind::kDelim : PktLine::Kind::kResponseEnd;
        break;
      case 3:
      case 4:
        return absl::InvalidArgumentError(absl::StrCat(
            "bad pkt-line length ", header_, " (", length == 4 ? "empty line" : "reserved", ")"));
      default:
        if (length > kMaxPktLineSize) {
          return absl::InvalidArgumentError(absl::StrCat(
              "pkt-line length ", length, " exceeds the maximum of ", kMaxPktLineSize));
        }
        size_ = length - 4;
        payload_.clear();
        continue;
    }
    header_.clear();
    return special;
  }
  size_t take = std::min(size_ - payload_.size(), data->size());
  payload_.append(data->data(), take);
  data->remove_prefix(take);
  if (payload_.size() < size_) {
    return std::nullopt;
  }
  header_.clear();
  PktLine line;
  line.payload = std::move(payload_);
  payload_.clear();
  return line;
}

bool IsValidRefName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxRefNameSize || name == "@" || name.back() == '/' ||
      name.back() == '.' || absl::StrContains(name, "..") || absl::StrContains(name, "@{") ||
      absl::StrContains(name, "//")) {
    return false;
  }
  for (char c : name) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f ||
        absl::string_view(" ~^:?*[\\").find(c) != absl::string_view::npos) {
      return false;
    }
  }
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part.front() == '.' || absl::EndsWith(part, ".lock")) {
      return false;
    }
  }
  return true;
}

bool ReceivePackCommandReader::HasCapability(absl::string_view name) const {
  return std::find(capabilities_.begin(), capabilities_.end(), name) != capabilities_.end();
}

absl::StatusOr<bool> ReceivePackCommandReader::Feed(absl::string_view data) {
  if (!error_.ok()) {
    return error_;
  }
  while (!done_ && !data.empty()) {
    size_t before = data.size();
    absl::StatusOr<std::optional<PktLine>> line = reader_.Next(&data);
    consumed_ += before - data.size();
    absl::Status status;
    if (!line.ok()) {
      status = Refused(line.status().message());
    } else if (!line->has_value()) {
      break;
    } else if ((*line)->kind == PktLine::Kind::kFlush) {
      done_ = true;
    } else {
      status = Command((*line)->payload);
    }
    if (!status.ok()) {
      error_ = status;
      return error_;
    }
  }
  return done_;
}

absl::Status ReceivePackCommandReader::Command(absl::string_view payload) {
  absl::ConsumeSuffix(&payload, "\n");
  bool first = updates_.empty();
  if (first && absl::ConsumePrefix(&payload, "shallow ")) {
    if (!IsObjectId(payload)) {
      return Refused("a 'shallow' line without an object id");
    }
    if (++shallow_lines_ > kMaxShallowLines) {
      return Refused(absl::StrCat("more than ", kMaxShallowLines, " 'shallow' lines"));
    }
    return absl::OkStatus();
  }
  if (first && absl::StartsWith(payload, "push-cert")) {
    return Refused(
        "signed pushes (push certificates) are not supported through abox; push "
        "without --signed");
  }
  if (updates_.size() == kMaxRefUpdates) {
    return Refused(absl::StrCat("more than ", kMaxRefUpdates, " ref updates in one push"));
  }
  size_t nul = payload.find('\0');
  if (first) {
    if (nul == absl::string_view::npos) {
      return Refused("the first command has no capability list (NUL missing)");
    }
    for (absl::string_view cap : absl::StrSplit(payload.substr(nul + 1), ' ', absl::SkipEmpty())) {
      capabilities_.emplace_back(cap);
    }
    payload = payload.substr(0, nul);
  } else if (nul != absl::string_view::npos) {
    return Refused("a command after the first carries a NUL (capabilities go on the first)");
  }
  std::vector<absl::string_view> parts = absl::StrSplit(payload, absl::MaxSplits(' ', 2));
  if (parts.size() != 3 || !IsObjectId(parts[0]) || parts[1].size() != parts[0].size() ||
      !IsObjectId(parts[1])) {
    return Refused(absl::StrCat("bad command '", QuoteForLog(payload),
                                "' (expected '<old-oid> <new-oid> <refname>')"));
  }
  if (!IsValidRefName(parts[2])) {
    return Refused(absl::StrCat("bad ref name '", QuoteForLog(parts[2]), "'"));
  }
  updates_.push_back({std::string(parts[0]), std::string(parts[1]), std::string(parts[2])});
  return absl::OkStatus();
}

std::string EncodePktLine(absl::string_view payload) {
  return absl::StrCat(absl::StrFormat("%04x", payload.size() + 4), payload);
}

std::string RefusalText(const RefRefusal& refusal) {
  return absl::StrCat("abox: push to ", refusal.refname, " refused: ", refusal.reason);
}

std::string BuildReceivePackRefusal(const std::vector<RefUpdate>& updates,
                                    const std::vector<RefRefusal>& refusals,
                                    const std::vector<std::string>& capabilities) {
  auto has = [&](absl::string_view cap) {
    return std::find(capabilities.begin(), capabilities.end(), cap) != capabilities.end();
  };
  // One line each: the texts go into single pkt-lines and git's one-line report.
  auto one_line = [](std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    std::replace(text.begin(), text.end(), '\r', ' ');
    return text.substr(0, 900);
  };
  std::vector<std::string> messages;
  for (const RefRefusal& r : refusals) {
    messages.push_back(one_line(RefusalText(r)));
  }
  if (messages.empty()) {
    messages.push_back("abox: push refused");
  }
  bool report = has("report-status") || has("report-status-v2");
  size_t band_data = has("side-band-64k") ? kSideBand64kData : has("side-band") ? kSideBandData : 0;
  if (!report && band_data == 0) {
    return EncodePktLine(absl::StrCat("ERR ", messages.front()));
  }
  std::string status;
  if (report) {
    // "unpack ok" as after a declined pre-receive hook: the refusal is about refs, not the pack.
    status = EncodePktLine("unpack ok\n");
    for (const RefUpdate& u : updates) {
      std::string reason = "abox: not pushed: another ref in this push was refused";
      for (const RefRefusal& r : refusals) {
        if (r.refname == u.refname) {
          reason = one_line(RefusalText(r));
        }
      }
      status += EncodePktLine(absl::StrCat("ng ", u.refname, " ", reason, "\n"));
    }
    status += "0000";
  }
  if (band_data == 0) {
    return status;
  }
  std::string out;
  for (const std::string& m : messages) {
    out += EncodePktLine(absl::StrCat("\x02", m, "\n"));
  }
  for (size_t pos = 0; pos < status.size(); pos += band_data) {
    out += EncodePktLine(absl::StrCat("\x01", status.substr(pos, band_data)));
  }
  out += "0000";
  return out;
}

}  // namespace abox::net
