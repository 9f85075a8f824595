// libFuzzer target: request heads from the guest, swapped for a destination one secret is bound
// to. Never a crash; a head sent upstream never carries the other secret's placeholder raw, is
// itself a valid request head (no CR/LF smuggled in by a value) with the same destination, and
// no refusal message names a real value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "src/net/http_request_head.h"
#include "src/net/secret_swap.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

constexpr absl::string_view kValueA = "real-value-A/with=odd&chars";
constexpr absl::string_view kValueB = "real-value-B";

const abox::net::SecretTable& Table() {
  static const auto* table = new std::shared_ptr<
      const abox::net::SecretTable>(*abox::net::SecretTable::Create({
      {"A", "ABOX_SECRET_A_0001", std::string(kValueA), {"a.example"}, {}, true},
      {"B", "ABOX_SECRET_B_0002", std::string(kValueB), {"*.b.example"}, {"Authorization"}, false},
  }));
  return **table;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  abox::net::HttpSniff sniff = abox::net::ParseHttpRequestHead(bytes);
  if (sniff.result != abox::net::HttpSniffResult::kHttp) {
    return 0;
  }
  absl::StatusOr<abox::net::SwapOutcome> out =
      abox::net::SwapSecrets(Table(), sniff.head, "a.example", 443);
  if (!out.ok()) {
    Check(!absl::StrContains(out.status().message(), kValueA));
    return 0;
  }
  if (out->refusal) {
    // (A header name the guest wrote is quoted: only a value the guest did not send counts.)
    for (absl::string_view v : {kValueA, kValueB}) {
      Check(!absl::StrContains(out->refusal->message, v) || absl::StrContains(bytes, v));
    }
    Check(!out->refusal->secret.empty());
    return 0;
  }
  Check(out->head.find("ABOX_SECRET_B_0002") == std::string::npos);
  Check(!absl::StrContains(out->head, kValueB) || bytes.find(kValueB) != absl::string_view::npos);
  Check(out->head.size() <= abox::net::kMaxSwappedHeadSize);
  if (out->head.size() <= abox::net::kMaxRequestHeadSize) {
    abox::net::HttpSniff again = abox::net::ParseHttpRequestHead(out->head);
    Check(again.result == abox::net::HttpSniffResult::kHttp);
    Check(again.head.head_size == out->head.size());
    Check(again.head.destination.host == sniff.head.destination.host);
    Check(again.head.headers.size() == sniff.head.headers.size());
  }
  return 0;
}
