// Copying bytes both ways between a guest's tunnel and an upstream, both seen as TunnelStreams:
// a plain socket (FdStream, which is what Splice in splice.h uses) or a TLS connection the proxy
// terminates (TlsStream), with filters on the way up (request checks) and down (scrubbing
// responses).
//
// Assumes what TunnelStream promises of both streams: Read on one thread while another Writes,
// and Reset from any thread unblocks both. Both peers are untrusted (they may stall or reset):
// every wait is bounded by the idle timeout, and the upstream stream bounds its own writes
// (FdStream's write timeout) and cancellation.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/net/tunnel.h"

namespace abox::net {

struct StreamSpliceOptions {
  // Both directions quiet this long: the connection is aborted (reset on both sides).
  absl::Duration idle_timeout = absl::Minutes(10);
  // Bytes already read from the guest (the sniffed head), sent upstream first (through
  // `filter_up` when set).
  absl::string_view first_up;
  // Optional: every guest byte passes through this on its way upstream (HTTP: each request head
  // is checked). It appends what may go upstream to `*out`. An error stops the guest ->
  // upstream direction there: `*out` is still sent, the upstream's write side is closed (so it
  // answers what it already got), its remaining bytes reach the guest, then
  // `refusal_reply(error)` does, then EOF. After a refusal the upstream gets at most
  // kRefusalDrainTime of quiet before both sides are reset.
  std::function<absl::Status(absl::string_view in, std::string* out)> filter_up;
  std::function<std::string(const absl::Status& refusal)> refusal_reply;
  // Optional: every upstream byte passes through this on its way to the guest (scrubbing
  // secrets out of responses); it appends what the guest may see to `*out`, and may hold bytes
  // back (a value split across reads). An error aborts both sides.
  std::function<absl::Status(absl::string_view in, std::string* out)> filter_down;
  // Optional, with filter_down: called once at the upstream's EOF to append the bytes it held
  // back to `*out`. An error aborts both sides.
  std::function<absl::Status(std::string* out)> finish_down;
  // The guest's EOF aborts both sides instead of being passed on: for an HTTP client (the
  // model broker's), closing means it gave up, and the upstream should stop at once rather
  // than keep streaming (and billing) an answer nobody reads.
  bool guest_eof_aborts = false;
};

// How long an upstream may stay quiet after a refused request before the splice is aborted.
inline constexpr absl::Duration kRefusalDrainTime = absl::Seconds(10);

struct SpliceResult {
  uint64_t bytes_up = 0;    // guest -> upstream (after filter_up), first_up included
  uint64_t bytes_down = 0;  // upstream -> guest (after filter_down), the refusal reply included
  // Both sides closed their write halves and every byte was delivered.
  bool clean = false;
  // "closed" or why it was aborted ("idle for 10m", "guest: ...", "upstream: ...",
  // "proxy shutting down", "response refused: ..." for a filter_down error).
  std::string ended;
  // Not OK when `filter_up` refused guest bytes (its error).
  absl::Status refused;
};

// Copies guest -> upstream on the calling thread and upstream -> guest on a second thread it
// starts and joins, until both directions have ended. An EOF on one side is passed on as a
// CloseWrite to the other, and the other direction goes on. An error on either side (or a
// kCancelled from either stream, reported as "proxy shutting down") aborts both: each is Reset.
SpliceResult SpliceStreams(TunnelStream& guest, TunnelStream& upstream,
                           const StreamSpliceOptions& options);

}  // namespace abox::net
