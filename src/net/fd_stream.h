// A connected non-blocking socket seen as a TunnelStream, so the code that copies between a
// guest tunnel and an upstream (SpliceStreams) and the TLS layer (TlsStream) handle both ends
// the same way.
//
// Every wait is bounded: Read by its deadline, Write by the write timeout (no progress for that
// long is an error), both by the optional cancel fd (the proxy's shutdown event) and by Reset.
// The peer is untrusted: it may stall, reset, or never read.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/base/unique_fd.h"
#include "src/net/tunnel.h"

namespace abox::net {

enum class FdWait : uint8_t { kReady, kTimeout, kCancelled };

// poll() for `events` on `fd` until `deadline`; kCancelled as soon as `cancel_fd` or `reset_fd`
// (either may be -1) is readable, even when `fd` is ready too.
[[nodiscard]] absl::StatusOr<FdWait> WaitForFd(int fd, short events, absl::Time deadline,
                                               int cancel_fd, int reset_fd = -1);

// Thread safety: one thread may Read while another Writes; CloseWrite and Reset may be called
// from any thread, and Reset unblocks a Read or Write in progress on another thread.
class FdStream final : public TunnelStream {
 public:
  struct Options {
    TunnelInfo info;
    // A Write that makes no progress this long fails (kDeadlineExceeded): the peer stopped
    // reading.
    absl::Duration write_timeout = absl::Minutes(10);
    // Readable: every Read and Write fails with kCancelled. Not owned; must outlive the stream.
    int cancel_fd = -1;
  };

  // Takes `fd`: a connected socket, non-blocking (as ConnectToAny returns it). Fails only when
  // the reset event cannot be made.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FdStream>> Create(base::UniqueFd fd,
                                                                        Options options);
  FdStream(const FdStream&) = delete;
  FdStream& operator=(const FdStream&) = delete;
  ~FdStream() override = default;

  [[nodiscard]] const TunnelInfo& info() const override { return options_.info; }
  // Up to `len` bytes; 0 at the peer's EOF; kDeadlineExceeded at `deadline`, kCancelled on the
  // cancel fd, kAborted after Reset, the errno otherwise (ECONNRESET when the peer reset).
  [[nodiscard]] absl::StatusOr<size_t> Read(char* buf, size_t len, absl::Time deadline) override;
  // All of `data`, or an error as Read (kDeadlineExceeded after write_timeout without progress).
  [[nodiscard]] absl::Status Write(absl::string_view data) override;
  // shutdown(SHUT_WR): the peer reads EOF, and may still answer.
  void CloseWrite() override;
  // Aborts: a TCP peer sees an RST at once (never a FIN), and a Read or Write blocked on
  // another thread returns kAborted, as does every later one.
  void Reset(absl::string_view reason) override;

 private:
  FdStream(base::UniqueFd fd, base::UniqueFd reset_event, Options options)
      : fd_(std::move(fd)), reset_event_(std::move(reset_event)), options_(options) {}

  // kAborted / kCancelled / kDeadlineExceeded for a wait that did not find the fd ready.
  [[nodiscard]] absl::Status WaitFor(short events, absl::Time deadline) const;

  const base::UniqueFd fd_;
  // An eventfd made readable by Reset: every poll watches it, so Reset wakes both directions.
  const base::UniqueFd reset_event_;
  const Options options_;
  std::atomic<bool> reset_{false};
};

}  // namespace abox::net
