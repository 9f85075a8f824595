// libFuzzer target: plain-HTTP guest connections are hostile. The parser must never crash,
// must give the same answer however the bytes are split, and may only report a destination
// that is a normalised host name or an IP literal, within the head-size and header limits.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "src/net/address_filter.h"
#include "src/net/host_name.h"
#include "src/net/http_request_head.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using abox::net::HttpSniffResult;
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  abox::net::HttpSniff whole = abox::net::ParseHttpRequestHead(bytes);

  size_t a = size == 0 ? 0 : data[0] % (size + 1);
  size_t b = size == 0 ? 0 : a + data[size - 1] % (size - a + 1);
  abox::net::HttpRequestHeadParser parser;
  parser.Feed(bytes.substr(0, a));
  parser.Feed(bytes.substr(a, b - a));
  const abox::net::HttpSniff& split = parser.Feed(bytes.substr(b));
  Check(split.result == whole.result);
  Check(split.head.destination.host == whole.head.destination.host);
  Check(split.head.destination.port == whole.head.destination.port);

  if (whole.result == HttpSniffResult::kHttp) {
    const auto& head = whole.head;
    Check(head.head_size <= size && head.head_size <= abox::net::kMaxRequestHeadSize);
    Check(head.headers.size() <= abox::net::kMaxRequestHeaders);
    Check(head.destination.port != 0);
    Check(!head.method.empty() && !head.target.empty());
    if (head.destination.is_ip_literal) {
      Check(abox::net::IpAddress::Parse(head.destination.host).has_value());
    } else {
      auto again = abox::net::NormalizeHostName(head.destination.host);
      Check(again.ok() && *again == head.destination.host);
    }
    for (const auto& h : head.headers) {
      Check(h.value.find('\0') == std::string::npos && h.value.find('\r') == std::string::npos &&
            h.value.find('\n') == std::string::npos);
    }
  } else if (whole.result != HttpSniffResult::kNeedMore) {
    Check(!whole.reason.empty());
  }
  return 0;
}
