#include "src/net/model_usage.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace abox::net {
namespace {

using Json = nlohmann::json;

std::optional<uint64_t> Count(const Json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_number_unsigned()) {
    return std::nullopt;
  }
  return it->get<uint64_t>();
}

// Anthropic's usage object: input is what the request cost to read (plain, cache writes and
// cache reads are all billed input); output is cumulative in message_delta (the last wins).
void ApplyAnthropicUsage(const Json& u, ModelUsage* usage) {
  if (!u.is_object()) {
    return;
  }
  std::optional<uint64_t> input = Count(u, "input_tokens");
  std::optional<uint64_t> created = Count(u, "cache_creation_input_tokens");
  std::optional<uint64_t> read = Count(u, "cache_read_input_tokens");
  if (input || created || read) {
    usage->input_tokens = input.value_or(0) + created.value_or(0) + read.value_or(0);
    usage->seen = true;
  }
  if (std::optional<uint64_t> output = Count(u, "output_tokens")) {
    usage->output_tokens = *output;
    usage->seen = true;
  }
}

void ApplyOpenAiUsage(const Json& u, ModelUsage* usage) {
  if (!u.is_object()) {
    return;
  }
  if (std::optional<uint64_t> input = Count(u, "input_tokens")) {
    usage->input_tokens = *input;
    usage->seen = true;
  }
  if (std::optional<uint64_t> output = Count(u, "output_tokens")) {
    usage->output_tokens = *output;
    usage->seen = true;
  }
}

const Json& Member(const Json& object, const char* name) {
  static const Json kNull;
  if (!object.is_object()) {
    return kNull;
  }
  auto it = object.find(name);
  return it == object.end() ? kNull : *it;
}

absl::string_view ContentType(const HttpResponseHead& head) {
  for (const HttpHeader& h : head.headers) {
    if (absl::EqualsIgnoreCase(h.name, "content-type")) {
      absl::string_view v = h.value;
      return absl::StripAsciiWhitespace(v.substr(0, v.find(';')));
    }
  }
  return "";
}

bool Encoded(const HttpResponseHead& head) {
  for (const HttpHeader& h : head.headers) {
    if (absl::EqualsIgnoreCase(h.name, "content-encoding") &&
        !absl::EqualsIgnoreCase(h.value, "identity")) {
      return true;
    }
  }
  return false;
}

ModelUsageReader::Format FormatOf(ModelUsageKind kind, const HttpResponseHead& head) {
  if (kind == ModelUsageKind::kNone || head.status < 200 || head.status >= 300 || Encoded(head)) {
    return ModelUsageReader::Format::kIgnored;
  }
  absl::string_view type = ContentType(head);
  if (absl::EqualsIgnoreCase(type, "text/event-stream")) {
    return ModelUsageReader::Format::kEventStream;
  }
  if (absl::EqualsIgnoreCase(type, "application/json")) {
    return ModelUsageReader::Format::kJson;
  }
  return ModelUsageReader::Format::kIgnored;
}

}  // namespace

ModelUsageReader::ModelUsageReader(ModelUsageKind route_usage, const HttpResponseHead& head)
    : ModelUsageReader(route_usage, FormatOf(route_usage, head)) {}

ModelUsageReader::ModelUsageReader(ModelUsageKind route_usage, Format format)
    : kind_(route_usage),
      format_(route_usage == ModelUsageKind::kNone ? Format::kIgnored : format) {}

void ModelUsageReader::Feed(absl::string_view data) {
  switch (format_) {
    case Format::kIgnored:
      return;
    case Format::kEventStream:
      FeedEventStream(data);
      return;
    case Format::kJson:
      if (json_too_big_) {
        return;
      }
      if (json_.size() + data.size() > kMaxUsageJsonSize) {
        json_too_big_ = true;
        json_.clear();
        json_.shrink_to_fit();
        return;
      }
      json_.append(data.data(), data.size());
      return;
  }
}

void ModelUsageReader::Finish() {
  if (format_ == Format::kJson && !json_too_big_) {
    ReadJson(json_, /*is_event=*/false);
    json_.clear();
  } else if (format_ == Format::kEventStream) {
    if (!line_.empty() || line_skipped_) {
      EndLine();
    }
    DispatchEvent();
  }
}

// SSE lines end in CRLF, LF or CR (HTML Living Standard, 9.2.6).
void ModelUsageReader::FeedEventStream(absl::string_view data) {
  while (!data.empty()) {
    if (after_cr_ && data.front() == '\n') {
      data.remove_prefix(1);
    }
    after_cr_ = false;
    size_t end = data.find_first_of("\r\n");
    absl::string_view part = data.substr(0, end);
    if (!line_skipped_) {
      if (line_.size() + part.size() > kMaxUsageEventSize) {
        line_skipped_ = true;
        line_.clear();
        line_.shrink_to_fit();
      } else {
        line_.append(part.data(), part.size());
      }
    }
    if (end == absl::string_view::npos) {
      return;
    }
    after_cr_ = data[end] == '\r';
    data.remove_prefix(end + 1);
    EndLine();
  }
}

void ModelUsageReader::EndLine() {
  if (line_skipped_) {
    // Too long to keep: if it was data, the event is incomplete and is not read.
    event_skipped_ = true;
    line_skipped_ = false;
    return;
  }
  if (line_.empty()) {
    DispatchEvent();
    return;
  }
  absl::string_view line = line_;
  if (absl::ConsumePrefix(&line, "data")) {
    if (line.empty() || absl::ConsumePrefix(&line, ":")) {
      absl::ConsumePrefix(&line, " ");
      if (data_.size() + line.size() + 1 > kMaxUsageEventSize) {
        event_skipped_ = true;
        data_.clear();
      } else if (!event_skipped_) {
        if (event_has_data_) {
          data_.push_back('\n');
        }
        data_.append(line.data(), line.size());
      }
      event_has_data_ = true;
    }
  }
  line_.clear();
}

void ModelUsageReader::DispatchEvent() {
  // Most events are text deltas: only those naming "usage" are worth parsing.
  if (event_has_data_ && !event_skipped_ && absl::StrContains(data_, "\"usage\"")) {
    ReadJson(data_, /*is_event=*/true);
  }
  data_.clear();
  if (data_.capacity() > 64 * 1024) {
    data_.shrink_to_fit();
  }
  event_has_data_ = false;
  event_skipped_ = false;
}

void ModelUsageReader::ReadJson(absl::string_view text, bool is_event) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return;  // counts stay what they were
  }
  const Json& type = Member(j, "type");
  std::string type_text = type.is_string() ? type.get<std::string>() : "";
  if (kind_ == ModelUsageKind::kAnthropicMessages) {
    if (!is_event) {
      ApplyAnthropicUsage(Member(j, "usage"), &usage_);
    } else if (type_text == "message_start") {
      ApplyAnthropicUsage(Member(Member(j, "message"), "usage"), &usage_);
    } else if (type_text == "message_delta") {
      ApplyAnthropicUsage(Member(j, "usage"), &usage_);
    }
  } else if (kind_ == ModelUsageKind::kOpenAiResponses) {
    if (!is_event) {
      ApplyOpenAiUsage(Member(j, "usage"), &usage_);
    } else if (type_text == "response.completed" || type_text == "response.incomplete" ||
               type_text == "response.failed") {
      ApplyOpenAiUsage(Member(Member(j, "response"), "usage"), &usage_);
    }
  }
}

}  // namespace abox::net
