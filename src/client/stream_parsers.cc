#include "src/client/stream_parsers.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace abox::client {
namespace {

absl::string_view WithoutCr(absl::string_view line) {
  if (absl::EndsWith(line, "\r")) {
    line.remove_suffix(1);
  }
  return line;
}

}  // namespace

absl::StatusOr<bool> LineSplitter::Feed(absl::string_view bytes, const LineFn& on_line) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == absl::string_view::npos) {
      if (partial_.size() + bytes.size() > max_line_bytes_) {
        return absl::ResourceExhaustedError(
            absl::StrCat("a stream line is longer than ", max_line_bytes_, " bytes"));
      }
      partial_.append(bytes.data(), bytes.size());
      return true;
    }
    bool keep_going;
    if (partial_.empty()) {
      keep_going = on_line(WithoutCr(bytes.substr(0, nl)));
    } else {
      partial_.append(bytes.data(), nl);
      std::string line = std::move(partial_);
      partial_.clear();
      keep_going = on_line(WithoutCr(line));
    }
    if (!keep_going) {
      return false;
    }
    bytes.remove_prefix(nl + 1);
  }
  return true;
}

bool LineSplitter::Finish(const LineFn& on_line) {
  if (partial_.empty()) {
    return true;
  }
  std::string line = std::move(partial_);
  partial_.clear();
  return on_line(WithoutCr(line));
}

absl::StatusOr<bool> SseParser::Feed(absl::string_view bytes, const EventFn& on_event) {
  return lines_.Feed(bytes, [&](absl::string_view line) { return Line(line, on_event); });
}

bool SseParser::Line(absl::string_view line, const EventFn& on_event) {
  if (line.empty()) {
    bool keep_going = true;
    if (has_data_) {
      SseEvent event{last_id_, event_.empty() ? "message" : event_, std::move(data_)};
      keep_going = on_event(event);
    }
    event_.clear();
    data_.clear();
    has_data_ = false;
    return keep_going;
  }
  if (line.front() == ':') {
    return true;  // comment (keepalive)
  }
  size_t colon = line.find(':');
  absl::string_view field = line.substr(0, colon);
  absl::string_view value;
  if (colon != absl::string_view::npos) {
    value = line.substr(colon + 1);
    if (absl::StartsWith(value, " ")) {
      value.remove_prefix(1);
    }
  }
  if (field == "data") {
    if (has_data_) {
      data_ += '\n';
    }
    absl::StrAppend(&data_, value);
    has_data_ = true;
  } else if (field == "event") {
    event_ = std::string(value);
  } else if (field == "id") {
    if (value.find('\0') == absl::string_view::npos) {
      last_id_ = std::string(value);
    }
  }
  return true;
}

}  // namespace abox::client
