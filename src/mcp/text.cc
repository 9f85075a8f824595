#include "src/mcp/text.h"

#include "src/base/utf8.h"

namespace abox::mcp {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The length of the well-formed sequence at the start of `s`, 0 when there is none.
size_t SequenceLength(absl::string_view s) {
  auto c = static_cast<unsigned char>(s[0]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || n > s.size()) {
    return 0;
  }
  return base::IsValidUtf8(s.substr(0, n)) ? n : 0;
}

}  // namespace

std::string SanitizeUtf8(absl::string_view bytes) {
  if (base::IsValidUtf8(bytes)) {
    return std::string(bytes);
  }
  std::string out;
  out.reserve(bytes.size() + 16);
  while (!bytes.empty()) {
    size_t n = SequenceLength(bytes);
    if (n == 0) {
      out += kReplacement;
      n = 1;
    } else {
      out.append(bytes.data(), n);
    }
    bytes.remove_prefix(n);
  }
  return out;
}

std::string TailUtf8(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) {
    return text;
  }
  size_t start = text.size() - max_bytes;
  while (start < text.size() && IsContinuation(static_cast<unsigned char>(text[start]))) {
    ++start;
  }
  return text.substr(start);
}

std::string HeadUtf8(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) {
    return text;
  }
  size_t end = max_bytes;
  while (end > 0 && IsContinuation(static_cast<unsigned char>(text[end]))) {
    --end;
  }
  return text.substr(0, end);
}

}  // namespace abox::mcp
