// One command the daemon is running in a sandbox: pumps its output into the exec log and to
// every attached reader (with flow control), feeds its stdin, takes signals and resizes, and
// records how it ended.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/daemon/services/event_bus.h"
#include "src/runtime/agent_client.h"
#include "src/store/exec_repo.h"

namespace abox::daemon {

// Where a reader's output lines go (an NDJSON or SSE response). `write` must not block; it
// returns false once the reader is gone and calls `on_sent` when the bytes left for the client.
struct OutputSink {
  std::function<bool(const nlohmann::json& line, std::function<void()> on_sent)> write;
  std::function<void()> finish;
};

// Writes the kept output of `exec` with seq > `after` (a "truncated" line first when older
// output that the reader asked for was dropped), then, if the exec has ended, its exit line.
// Returns the last seq written.
int64_t ReplayOutput(const store::ExecWithOutput& exec, int64_t after, const OutputSink& sink);

// Thread-safe. Owned by the sandbox's entry in the manager (shared with request handlers).
// The runtime::Exec inside refers to the sandbox's agent connection: Join() must return
// before that connection is destroyed.
class LiveExec final : public std::enable_shared_from_this<LiveExec> {
 public:
  // Unsent bytes a reader may have before the command's output stops being read (so a slow
  // client slows the command down instead of the daemon buffering without bound).
  static constexpr size_t kReaderWindow = 1 << 20;
  // Stdin bytes queued for a command that does not read them before writes are refused.
  static constexpr size_t kMaxStdinBacklog = 4 << 20;
  // Without a reader, output goes to the exec log in batches: one transaction once this much
  // is pending or the oldest pending piece is kStoreBatchDelay old (and at the end, and before
  // a reader attaches), not one per frame of the guest's. With a reader, each chunk is in the
  // log before the reader is shown it (a kill -9 of aboxd loses nothing anyone saw).
  static constexpr size_t kStoreBatchBytes = 64 << 10;
  static constexpr absl::Duration kStoreBatchDelay = absl::Milliseconds(50);

  struct Options {
    bool stdin_open = false;
    bool kill_on_disconnect = false;
    // Sees every stdin write in order before it is queued; an error refuses that write (the
    // command goes on). Called with the exec's lock held: it must not call back into it.
    std::function<absl::Status(absl::string_view data)> stdin_check;
  };
  using DoneFn = std::function<void(const store::ExecRecord&)>;

  // Takes over a started exec (already recorded as running) and starts pumping its output.
  // `on_done` runs once, on the pump thread, after the result was recorded and published.
  static std::shared_ptr<LiveExec> Start(std::unique_ptr<runtime::Exec> exec,
                                         store::ExecRecord record, Options options,
                                         store::ExecRepo& repo, EventBus& events, DoneFn on_done);
  LiveExec(const LiveExec&) = delete;
  LiveExec& operator=(const LiveExec&) = delete;
  ~LiveExec();

  [[nodiscard]] const std::string& id() const { return record_.id; }
  // The exec as recorded when it started.
  [[nodiscard]] const store::ExecRecord& started_record() const { return record_; }
  [[nodiscard]] bool done() const;

  // Replays the output after `after`, then follows it live until the exec ends (then the exit
  // line and finish). Returns a reader handle for Detach(), or 0 when the exec had already
  // ended (everything was written and the sink finished).
  absl::StatusOr<uint64_t> Attach(int64_t after, OutputSink sink);
  // The reader went away. The last reader leaving an exec started with kill_on_disconnect
  // kills the command (closing its stdin first).
  void Detach(uint64_t reader);
  // The attach deadline passed: an exec started with kill_on_disconnect that no reader has
  // attached to yet belongs to a client that died between starting it and reading it (or
  // never meant to read it); it is killed like one whose last reader left. Returns whether it
  // killed.
  bool KillIfNeverAttached(absl::Duration deadline);

  // Queues stdin bytes (and EOF) and calls `done` once they were handed to the guest, or with
  // the reason they could not be (the exec is over, stdin was not opened, backlog full).
  void WriteStdin(std::string data, bool eof, std::function<void(absl::Status)> done);
  absl::Status Signal(int signal);
  absl::Status Resize(int rows, int cols);

  // Calls `fn` with the ended exec: at once if it already ended, else when it ends.
  void OnDone(std::function<void(const store::ExecRecord&)> fn);

  // The sandbox is going away: the exec will be recorded as interrupted with `reason` (the
  // caller then fails the agent connection, which ends the command).
  void SetInterruptReason(const std::string& reason);
  // Waits for the pump and stdin threads and drops the runtime exec. Idempotent.
  void Join();

 private:
  struct Reader {
    OutputSink sink;
    std::shared_ptr<std::atomic<size_t>> unsent;
  };
  struct StdinItem {
    std::string data;
    bool eof;
    std::function<void(absl::Status)> done;
  };

  LiveExec(std::unique_ptr<runtime::Exec> exec, store::ExecRecord record, Options options,
           store::ExecRepo& repo, EventBus& events, DoneFn on_done);
  void Pump();
  void StdinLoop();
  store::ExecResult ResultOf(const absl::StatusOr<proto::ExitInfo>& info);
  void WriteToReaders(const nlohmann::json& line, size_t bytes);
  // Closes stdin and sends SIGKILL, remembering `why` for the exec's error. Holds mu_.
  void KillLocked(const std::string& why);
  // kill_on_disconnect: the last reader left (Detach, or a write to a stream that is gone).
  void KillIfLastReaderLeftLocked();
  // Writes the pending output to the exec log in one transaction. Holds mu_.
  void FlushLocked();

  std::unique_ptr<runtime::Exec> exec_;
  store::ExecRecord record_;
  const Options options_;
  store::ExecRepo* repo_;
  EventBus* events_;
  DoneFn on_done_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  store::ExecRecord final_;
  std::string interrupt_reason_;
  std::string kill_reason_;  // why the daemon killed it (kill_on_disconnect), for the record
  bool killed_ = false;      // SIGKILL sent by the daemon (once is enough)
  int64_t seq_ = 0;
  // Output given to readers (seq up to seq_) and not yet in the exec log.
  std::vector<store::OutputPiece> pending_;
  size_t pending_bytes_ = 0;
  absl::Time flush_at_;  // when the pending output must be written
  std::map<uint64_t, Reader> readers_;
  uint64_t next_reader_ = 1;
  bool had_reader_ = false;
  std::vector<std::function<void(const store::ExecRecord&)>> waiters_;
  std::deque<StdinItem> stdin_;
  size_t stdin_bytes_ = 0;
  bool stdin_closed_ = false;
  bool stdin_thread_started_ = false;
  bool joined_ = false;
  std::mutex join_mu_;  // held for all of Join(): the second caller waits for the first

  std::thread pump_;
  std::thread stdin_thread_;
};

}  // namespace abox::daemon
