// libFuzzer target: the model broker reads token usage from provider bodies (untrusted) and
// routes guest request lines (hostile). The usage reader must never crash, must read the same
// counts however the body is split (SSE lines and events across reads), and the route table
// must forward only plain paths.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "src/net/model_routes.h"
#include "src/net/model_usage.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

abox::net::ModelUsage Read(abox::net::ModelUsageKind kind,
                           abox::net::ModelUsageReader::Format format, absl::string_view body,
                           size_t a, size_t b) {
  abox::net::ModelUsageReader reader(kind, format);
  a = std::min(a, body.size());
  b = std::min(std::max(a, b), body.size());
  reader.Feed(body.substr(0, a));
  reader.Feed(body.substr(a, b - a));
  reader.Feed(body.substr(b));
  reader.Finish();
  return reader.usage();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) {
    return 0;
  }
  auto kind = (data[0] & 1) != 0 ? abox::net::ModelUsageKind::kAnthropicMessages
                                 : abox::net::ModelUsageKind::kOpenAiResponses;
  auto format = (data[0] & 2) != 0 ? abox::net::ModelUsageReader::Format::kEventStream
                                   : abox::net::ModelUsageReader::Format::kJson;
  absl::string_view body(reinterpret_cast<const char*>(data) + 3, size - 3);
  abox::net::ModelUsage whole = Read(kind, format, body, body.size(), body.size());
  abox::net::ModelUsage split = Read(kind, format, body, data[1], data[1] + size_t{data[2]});
  Check(whole.input_tokens == split.input_tokens);
  Check(whole.output_tokens == split.output_tokens);
  Check(whole.seen == split.seen);

  // The body's first line as a request line's method and target.
  absl::string_view line = body.substr(0, body.find('\n'));
  size_t space = line.find(' ');
  if (space != absl::string_view::npos) {
    abox::net::ModelRoute route =
        abox::net::ClassifyModelRoute(line.substr(0, space), line.substr(space + 1));
    if (route.kind == abox::net::ModelRouteKind::kForward) {
      Check(route.api.has_value());
      Check(!absl::StrContains(route.path, "..") && !absl::StrContains(route.path, "%") &&
            !absl::StrContains(route.path, "//"));
      Check(absl::StartsWith(route.upstream_target, "/v1/"));
    }
  }
  return 0;
}
