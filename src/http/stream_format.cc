#include "src/http/stream_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace abox::http {
namespace {

// A field value without the characters that would end it early.
std::string SingleLine(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c != '\n' && c != '\r' && c != '\0') {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::string ChunkFrame(absl::string_view data) {
  if (data.empty()) {
    return "";
  }
  return absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n");
}

std::string FormatSseEvent(const SseEvent& event) {
  std::string out;
  if (!event.id.empty()) {
    absl::StrAppend(&out, "id: ", SingleLine(event.id), "\n");
  }
  if (!event.event.empty()) {
    absl::StrAppend(&out, "event: ", SingleLine(event.event), "\n");
  }
  // SSE ends a line at \r\n, \r or \n: split on all three so none survives inside a field.
  std::string data = event.data;
  absl::StrReplaceAll({{"\r\n", "\n"}, {"\r", "\n"}}, &data);
  for (absl::string_view line : absl::StrSplit(data, '\n')) {
    absl::StrAppend(&out, "data: ", line, "\n");
  }
  out.push_back('\n');
  return out;
}

}  // namespace abox::http
