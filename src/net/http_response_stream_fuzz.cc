// libFuzzer target: the upstream -> guest bytes of an intercepted connection are untrusted. The
// response follower must never crash, must reach the same verdict however the bytes are split,
// and must never let the scrubbed value through, whatever the framing (Content-Length
// re-framed as chunked or as ending at close, chunked, close-delimited, after 101).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "src/net/http_response_stream.h"

namespace {

constexpr absl::string_view kValue = "s3cr3t-VALUE-42";
constexpr absl::string_view kPlaceholder = "ABOX_P_0001";

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

struct Run {
  std::string down;
  absl::Status status;
  uint64_t responses = 0;
};

// The requests the responses answer come from the input's first byte: HEAD or not, HTTP/1.0
// or 1.1, for four requests.
Run Follow(absl::string_view bytes, uint8_t requests, size_t a, size_t b) {
  absl::StatusOr<abox::net::ValueScrubber> scrubber =
      abox::net::ValueScrubber::Create({{std::string(kValue), std::string(kPlaceholder)}});
  Check(scrubber.ok());
  abox::net::HttpResponseStream stream(
      [&](const abox::net::HttpResponseHead&, const abox::net::PendingRequest&) {
        return std::optional<abox::net::ValueScrubber>(*scrubber);
      });
  for (int i = 0; i < 4; ++i) {
    Check(stream.ExpectResponse({.is_head = ((requests >> (2 * i)) & 1) != 0,
                                 .minor_version = ((requests >> (2 * i + 1)) & 1) != 0 ? 0 : 1}));
  }
  Run run;
  for (absl::string_view part : {bytes.substr(0, a), bytes.substr(a, b - a), bytes.substr(b)}) {
    run.status = stream.Feed(part, &run.down);
    if (!run.status.ok()) {
      break;
    }
  }
  if (run.status.ok()) {
    run.status = stream.Finish(&run.down);
  }
  run.responses = stream.responses();
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  uint8_t requests = data[0];
  absl::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  Run whole = Follow(bytes, requests, bytes.size(), bytes.size());
  size_t a = bytes.empty() ? 0 : data[size - 1] % (bytes.size() + 1);
  size_t b = bytes.empty() ? 0 : a + data[size / 2] % (bytes.size() - a + 1);
  Run split = Follow(bytes, requests, a, b);
  Check(whole.status.code() == split.status.code());
  Check(whole.responses == split.responses);
  Check(!absl::StrContains(whole.down, kValue));
  Check(!absl::StrContains(split.down, kValue));
  if (!whole.status.ok()) {
    Check(!whole.status.message().empty());
  }
  return 0;
}
