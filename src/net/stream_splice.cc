#include "src/net/stream_splice.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace abox::net {
namespace {

constexpr size_t kChunk = size_t{64} * 1024;

// State shared by the two directions of one splice.
class SpliceState {
 public:
  SpliceState(TunnelStream& guest, TunnelStream& upstream, absl::Duration idle)
      : guest_(guest),
        upstream_(upstream),
        idle_(idle),
        last_activity_ns_(absl::ToUnixNanos(absl::Now())) {}

  void Touch() { last_activity_ns_.store(absl::ToUnixNanos(absl::Now())); }
  absl::Time IdleDeadline() const {
    absl::Duration idle = refusing_.load() ? std::min(idle_, kRefusalDrainTime) : idle_;
    return absl::FromUnixNanos(last_activity_ns_.load()) + idle;
  }
  // True when the wait that expired at `IdleDeadline()` really found both sides quiet.
  bool IsIdle() const { return absl::Now() >= IdleDeadline(); }

  // First caller wins: records why, resets the guest and the upstream (unblocks the other
  // direction).
  void Abort(std::string why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) {
        return;
      }
      aborted_ = true;
      why_ = std::move(why);
    }
    guest_.Reset(why_);
    upstream_.Reset(why_);
  }
  // Abort for an error of `side` ("guest" or "upstream"); kCancelled is the proxy's shutdown.
  void Abort(absl::string_view side, const absl::Status& error) {
    Abort(absl::IsCancelled(error) ? std::string("proxy shutting down")
                                   : absl::StrCat(side, ": ", error.message()));
  }
  bool aborted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return aborted_;
  }
  std::string why() const {
    std::lock_guard<std::mutex> lock(mu_);
    return why_;
  }

  // The filter refused guest bytes: `reply` goes to the guest once the upstream has finished
  // (see CloseGuest), and the idle timeout becomes kRefusalDrainTime.
  void Refuse(absl::Status why, std::string reply) {
    std::lock_guard<std::mutex> lock(mu_);
    refused_ = std::move(why);
    reply_ = std::move(reply);
    refusing_.store(true);
    Touch();
  }
  absl::Status refused() const {
    std::lock_guard<std::mutex> lock(mu_);
    return refused_;
  }
  // Upstream EOF: what `finish_down` held back, the refusal's reply (if any), then EOF to the
  // guest.
  void CloseGuest(const StreamSpliceOptions& options) {
    std::string out;
    if (options.finish_down) {
      absl::Status finished = options.finish_down(&out);
      if (!finished.ok()) {
        Abort(absl::StrCat("response refused: ", finished.message()));
        return;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      out += reply_;
      reply_.clear();
    }
    if (!out.empty()) {
      absl::Status written = guest_.Write(out);
      if (written.ok()) {
        bytes_down += out.size();
      } else if (!refusing_.load()) {
        // After a refusal the guest may be gone before its reply: the refusal stays the reason
        // the connection ended.
        Abort("guest", written);
        return;
      }
    }
    guest_.CloseWrite();
  }

  TunnelStream& guest() { return guest_; }
  TunnelStream& upstream() { return upstream_; }
  absl::Duration idle() const { return idle_; }

  std::atomic<uint64_t> bytes_up{0};
  std::atomic<uint64_t> bytes_down{0};

 private:
  TunnelStream& guest_;
  TunnelStream& upstream_;
  const absl::Duration idle_;
  std::atomic<int64_t> last_activity_ns_;
  std::atomic<bool> refusing_{false};
  mutable std::mutex mu_;
  bool aborted_ = false;
  std::string why_;
  absl::Status refused_;
  std::string reply_;
};

std::string IdleText(absl::Duration idle) {
  return absl::StrCat("idle for ", absl::FormatDuration(idle));
}

// One Read from `side` bounded by the idle deadline: the byte count, or nullopt when the
// splice was aborted (idle, or the read failed). A wait that expires while the other direction
// was active is retried. `rearm`: wait at most a second at a time, for the upstream side, whose
// idle deadline a refusal on the other direction shortens.
std::optional<size_t> ReadOrAbort(SpliceState& s, TunnelStream& from, absl::string_view side,
                                  std::string& buf, bool rearm) {
  for (;;) {
    absl::Time deadline = s.IdleDeadline();
    if (rearm) {
      deadline = std::min(deadline, absl::Now() + absl::Seconds(1));
    }
    absl::StatusOr<size_t> n = from.Read(buf.data(), buf.size(), deadline);
    if (n.ok()) {
      return *n;
    }
    if (!absl::IsDeadlineExceeded(n.status())) {
      s.Abort(side, n.status());
      return std::nullopt;
    }
    if (s.IsIdle()) {
      s.Abort(IdleText(s.idle()));
      return std::nullopt;
    }
  }
}

// upstream -> guest, until upstream EOF (passed on as CloseWrite) or an abort.
void CopyDown(SpliceState& s, const StreamSpliceOptions& options) {
  std::string buf(kChunk, '\0');
  std::string filtered;
  for (;;) {
    std::optional<size_t> n = ReadOrAbort(s, s.upstream(), "upstream", buf, /*rearm=*/true);
    if (!n || s.aborted()) {
      return;
    }
    if (*n == 0) {
      s.CloseGuest(options);
      return;
    }
    absl::string_view data(buf.data(), *n);
    if (options.filter_down) {
      filtered.clear();
      absl::Status verdict = options.filter_down(data, &filtered);
      if (!verdict.ok()) {
        s.Abort(absl::StrCat("response refused: ", verdict.message()));
        return;
      }
      data = filtered;
    }
    if (!data.empty()) {
      absl::Status written = s.guest().Write(data);
      if (!written.ok()) {
        s.Abort("guest", written);
        return;
      }
    }
    s.bytes_down += data.size();
    s.Touch();
  }
}

// Sends guest bytes upstream, through the filter when there is one. False when the filter
// refused them (what it let through is sent, then the upstream's write side closed) or the
// send failed (aborted).
bool SendUp(SpliceState& s, const StreamSpliceOptions& options, absl::string_view data) {
  std::string filtered;
  absl::Status verdict;
  if (options.filter_up) {
    verdict = options.filter_up(data, &filtered);
    data = filtered;
    if (!verdict.ok()) {
      s.Refuse(verdict, options.refusal_reply ? options.refusal_reply(verdict) : "");
    }
  }
  if (!data.empty()) {
    absl::Status sent = s.upstream().Write(data);
    if (!sent.ok()) {
      s.Abort("upstream", sent);
      return false;
    }
  }
  s.bytes_up += data.size();
  if (!verdict.ok()) {
    s.upstream().CloseWrite();
    return false;
  }
  return true;
}

// guest -> upstream, until guest EOF (passed on as CloseWrite), a refusal or an abort.
// Returns true on EOF.
bool CopyUp(SpliceState& s, const StreamSpliceOptions& options) {
  std::string buf(kChunk, '\0');
  for (;;) {
    std::optional<size_t> n = ReadOrAbort(s, s.guest(), "guest", buf, /*rearm=*/false);
    if (!n) {
      return false;
    }
    if (*n == 0) {
      if (options.guest_eof_aborts) {
        s.Abort("guest closed the connection");
        return false;
      }
      s.upstream().CloseWrite();
      return true;
    }
    if (!SendUp(s, options, absl::string_view(buf.data(), *n))) {
      return false;
    }
    s.Touch();
  }
}

}  // namespace

SpliceResult SpliceStreams(TunnelStream& guest, TunnelStream& upstream,
                           const StreamSpliceOptions& options) {
  SpliceState state(guest, upstream, options.idle_timeout);
  SpliceResult result;
  bool go_on = SendUp(state, options, options.first_up);
  if (state.aborted()) {
    result.ended = state.why();
    return result;
  }
  std::thread down([&state, &options] { CopyDown(state, options); });
  bool up_clean = go_on && CopyUp(state, options);
  down.join();
  result.bytes_up = state.bytes_up.load();
  result.bytes_down = state.bytes_down.load();
  result.refused = state.refused();
  result.clean = up_clean && !state.aborted();
  result.ended = state.aborted()        ? state.why()
                 : !result.refused.ok() ? std::string(result.refused.message())
                                        : "closed";
  return result;
}

}  // namespace abox::net
