// libFuzzer target: the first bytes of every guest connection are hostile. The sniffer must
// never crash or read out of bounds, must give the same answer however the bytes are split,
// and may only report a server name that is a normalised host name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "src/net/host_name.h"
#include "src/net/tls_client_hello.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using abox::net::SniffResult;
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  abox::net::TlsSniff whole = abox::net::SniffClientHello(bytes);

  // Fed in three pieces at input-chosen points: same result.
  size_t a = size == 0 ? 0 : data[0] % (size + 1);
  size_t b = size == 0 ? 0 : a + data[size - 1] % (size - a + 1);
  abox::net::ClientHelloSniffer sniffer;
  sniffer.Feed(bytes.substr(0, a));
  sniffer.Feed(bytes.substr(a, b - a));
  const abox::net::TlsSniff& split = sniffer.Feed(bytes.substr(b));
  Check(split.result == whole.result);
  Check(split.hello.server_name == whole.hello.server_name);
  Check(split.hello.alpn == whole.hello.alpn);
  Check(sniffer.bytes().size() <= size);

  if (whole.result == SniffResult::kTls) {
    Check(whole.hello.record_bytes <= size);
    Check(whole.hello.record_bytes <= abox::net::kMaxClientHelloRecordBytes);
    if (whole.hello.server_name) {
      auto again = abox::net::NormalizeHostName(*whole.hello.server_name);
      Check(again.ok() && *again == *whole.hello.server_name);
    }
    for (const auto& name : whole.hello.alpn) {
      Check(!name.empty() && name.size() <= 255);
    }
  } else if (whole.result != SniffResult::kNeedMore) {
    Check(!whole.reason.empty());
  }
  return 0;
}
