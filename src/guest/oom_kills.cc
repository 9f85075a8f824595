#include "src/guest/oom_kills.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "src/base/io.h"
#include "src/proto/messages.h"

namespace abox::guest {
namespace {

// /proc/vmstat is a few KiB (one "name value" line per counter); anything much larger is not it.
constexpr size_t kMaxVmstatBytes = 256 << 10;

}  // namespace

std::optional<uint64_t> ParseOomKillCounter(absl::string_view vmstat) {
  for (absl::string_view line : absl::StrSplit(vmstat, '\n')) {
    std::pair<absl::string_view, absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.first != "oom_kill") {
      continue;
    }
    uint64_t value = 0;
    if (!absl::SimpleAtoi(fields.second, &value)) {
      return std::nullopt;
    }
    return value;
  }
  return std::nullopt;
}

std::optional<uint64_t> ReadOomKillCounter(const std::string& path) {
  if (path.empty()) {
    return std::nullopt;
  }
  absl::StatusOr<std::string> text = base::ReadFile(path, kMaxVmstatBytes);
  if (!text.ok()) {
    return std::nullopt;
  }
  return ParseOomKillCounter(*text);
}

uint32_t OomKillsBetween(std::optional<uint64_t> before, std::optional<uint64_t> after) {
  if (!before || !after || *after <= *before) {
    return 0;
  }
  return static_cast<uint32_t>(std::min<uint64_t>(*after - *before, uint64_t{proto::kMaxOomKills}));
}

}  // namespace abox::guest
