// libFuzzer target: request bodies and response bodies pass through the leak detector and the
// value scrubbers. None may crash; each must give the same answer however the bytes are split
// (a needle split across writes is the easy way around a per-write check); the scrubbers hold
// back less than the longest value and re-frame chunked bodies consistently.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "src/net/leak_detector.h"
#include "src/net/value_scrubber.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

const std::shared_ptr<const abox::net::LeakPatterns>& Patterns() {
  static const auto* patterns =
      new std::shared_ptr<const abox::net::LeakPatterns>(*abox::net::LeakPatterns::Create(
          {{"A", "ABOX_SECRET_A_0001"}, {"B", "b\xfb\xff\xbf\xfe\xfb\xef\xff"}}));
  return *patterns;
}

abox::net::ValueScrubber Scrubber() {
  return *abox::net::ValueScrubber::Create(
      {{"value-one", "PH_1"}, {"value-one-longer", "PH_2"}, {"aaaa", "PH_3"}});
}

// The data of a chunked body as ChunkedScrubber writes it (strict, no empty chunk before the
// last), with what follows the last chunk appended after a '|'.
std::string Dechunk(absl::string_view body) {
  std::string data;
  while (true) {
    size_t crlf = body.find("\r\n");
    if (crlf == absl::string_view::npos) {
      Check(body.empty());  // the body ended inside the input
      return data;
    }
    size_t chunk = 0;
    for (char c : body.substr(0, crlf)) {
      Check((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
      chunk = chunk * 16 + static_cast<size_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    body.remove_prefix(crlf + 2);
    if (chunk == 0) {
      return data + "|" + std::string(body);
    }
    Check(body.size() >= chunk + 2 && body.substr(chunk, 2) == "\r\n");
    data.append(body.data(), chunk);
    body.remove_prefix(chunk + 2);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  size_t a = size == 0 ? 0 : data[0] % (size + 1);
  size_t b = size == 0 ? 0 : a + data[size - 1] % (size - a + 1);
  absl::string_view parts[] = {bytes.substr(0, a), bytes.substr(a, b - a), bytes.substr(b)};

  abox::net::LeakDetector whole(Patterns());
  bool found = whole.Feed(bytes).has_value();
  abox::net::LeakDetector split(Patterns());
  bool split_found = false;
  for (absl::string_view part : parts) {
    split_found = split.Feed(part).has_value() || split_found;
  }
  Check(found == split_found);

  std::string whole_out;
  abox::net::ValueScrubber w = Scrubber();
  w.Feed(bytes, &whole_out);
  Check(w.held() < 16);
  w.Finish(&whole_out);
  Check(w.held() == 0);
  std::string split_out;
  abox::net::ValueScrubber s = Scrubber();
  for (absl::string_view part : parts) {
    s.Feed(part, &split_out);
  }
  s.Finish(&split_out);
  Check(whole_out == split_out);

  abox::net::ChunkedScrubber cw(Scrubber());
  std::string cw_out;
  auto cw_result = cw.Feed(bytes, &cw_out);
  abox::net::ChunkedScrubber cs(Scrubber());
  std::string cs_out;
  absl::Status cs_status;
  size_t cs_consumed = 0;
  for (absl::string_view part : parts) {
    if (cs.done()) {
      break;
    }
    auto r = cs.Feed(part, &cs_out);
    if (!r.ok()) {
      cs_status = r.status();
      break;
    }
    cs_consumed += *r;
  }
  Check(cw_result.ok() == cs_status.ok());
  if (cw_result.ok()) {
    Check(cw.done() == cs.done());
    Check(*cw_result == cs_consumed);
    Check(Dechunk(cw_out) == Dechunk(cs_out));
  }
  return 0;
}
