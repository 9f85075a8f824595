// libFuzzer target: the guest -> upstream bytes of a plain-HTTP connection are hostile. The
// stream follower must never crash, must give the same answer however the bytes are split,
// and may only forward a prefix of its input (with an identity head callback): what goes
// upstream is exactly the requests it accepted, never a byte past a refusal.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "src/net/http_request_stream.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

struct Run {
  std::string up;
  absl::Status status;
  uint64_t requests = 0;
};

// Accepts heads for one host only (as the proxy does) and forwards them unchanged.
Run Follow(absl::string_view bytes, size_t a, size_t b) {
  abox::net::HttpRequestStream stream([](const abox::net::HttpRequestHead& head,
                                         absl::string_view raw) -> absl::StatusOr<std::string> {
    Check(raw.size() == head.head_size);
    if (head.destination.host != "a.example") {
      return absl::PermissionDeniedError("another host");
    }
    return std::string(raw);
  });
  Run run;
  for (absl::string_view part : {bytes.substr(0, a), bytes.substr(a, b - a), bytes.substr(b)}) {
    absl::Status s = stream.Feed(part, &run.up);
    if (!s.ok()) {
      run.status = s;
      break;
    }
  }
  run.requests = stream.requests();
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  Run whole = Follow(bytes, size, size);
  size_t a = size == 0 ? 0 : data[0] % (size + 1);
  size_t b = size == 0 ? 0 : a + data[size - 1] % (size - a + 1);
  Run split = Follow(bytes, a, b);
  Check(whole.status.code() == split.status.code());
  Check(whole.up == split.up);
  Check(whole.requests == split.requests);
  Check(bytes.substr(0, whole.up.size()) == whole.up);
  if (!whole.status.ok()) {
    Check(!whole.status.message().empty());
  }
  return 0;
}
