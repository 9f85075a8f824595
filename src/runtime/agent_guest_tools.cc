#include "src/runtime/agent_guest_tools.h"

#include <signal.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "src/base/status_macros.h"

namespace abox::runtime {
namespace {

// The tools print one line on failure; more than this is cut.
constexpr size_t kMaxStderr = 16 << 10;

// Holds one tool run to its GuestToolDeadline on a thread of its own: the run itself may be
// blocked in the guest's hands (writing stdin nobody reads, waiting for output that never
// comes), so the kill has to come from outside it.
class Watchdog final {
 public:
  Watchdog(const GuestToolDeadline& deadline, Exec& exec, AgentClient& agent, std::string what)
      : deadline_(deadline), exec_(exec), agent_(agent), what_(std::move(what)) {
    thread_ = std::thread([this] { Watch(); });
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Bytes went to or came from the tool: it earns more time.
  void Progress(uint64_t bytes) {
    std::lock_guard lock(mu_);
    bytes_ += bytes;
  }
  // Why the run was cut short; "" while it was not.
  std::string missed() {
    std::lock_guard lock(mu_);
    return missed_;
  }

 private:
  absl::Time DeadlineLocked() const {
    uint64_t rate = std::max<uint64_t>(deadline_.bytes_per_second, 1);
    return start_ + deadline_.floor + absl::Seconds(static_cast<double>(bytes_) / rate);
  }
  void Watch() {
    std::unique_lock lock(mu_);
    for (;;) {
      if (done_) {
        return;
      }
      absl::Time now = absl::Now();
      absl::Time deadline = DeadlineLocked();
      if (now >= deadline) {
        break;
      }
      // In steps of at most a second: a far deadline must not overflow the clock arithmetic.
      cv_.wait_for(lock, absl::ToChronoNanoseconds(std::min(deadline - now, absl::Seconds(1))));
    }
    absl::Duration took = absl::Now() - start_;
    missed_ = absl::StrCat(what_, " did not finish within ",
                           absl::FormatDuration(absl::Trunc(took, absl::Seconds(1))), " (",
                           absl::FormatDuration(deadline_.floor), " plus 1 s per ",
                           deadline_.bytes_per_second >> 10, " KiB it moved, ", bytes_,
                           " bytes): the guest stopped answering or reading, so it was killed");
    lock.unlock();
    exec_.Signal(SIGKILL);
    lock.lock();
    if (cv_.wait_for(lock, absl::ToChronoNanoseconds(deadline_.kill_grace),
                     [this] { return done_; })) {
      return;
    }
    // The guest did not end its own tool: its agent is not trusted again.
    absl::StrAppend(&missed_, "; the guest agent did not end it within ",
                    absl::FormatDuration(deadline_.kill_grace), " either, so the sandbox failed");
    lock.unlock();
    agent_.Fail(absl::DeadlineExceededError(missed()));
  }

  const GuestToolDeadline deadline_;
  Exec& exec_;
  AgentClient& agent_;
  const std::string what_;
  const absl::Time start_ = absl::Now();
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;   // guarded by mu_
  uint64_t bytes_ = 0;  // guarded by mu_
  std::string missed_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace

absl::Status AgentGuestTools::Run(const std::vector<std::string>& args, const InputFn& input,
                                  const OutputFn& output) {
  proto::ExecRequest request;
  request.argv = {tool_path_, "ws"};
  request.argv.insert(request.argv.end(), args.begin(), args.end());
  request.user = "root";
  request.cwd = "/";
  request.stdin_open = static_cast<bool>(input);
  ABOX_ASSIGN_OR_RETURN(std::unique_ptr<Exec> exec, agent_.StartExec(request));
  std::string what = absl::StrCat("abox-guest ws ", args.empty() ? "" : args[0]);
  std::string where = sandbox_id_.empty() ? "" : absl::StrCat(" in sandbox ", sandbox_id_);
  std::optional<Watchdog> watchdog;
  watchdog.emplace(deadline_, *exec, agent_, absl::StrCat(what, where));

  absl::Status input_status;
  if (input) {
    input_status = input([&](absl::string_view data) {
      // In slices, so a big honest write earns its time as it goes.
      while (!data.empty()) {
        absl::string_view slice = data.substr(0, 1 << 20);
        ABOX_RETURN_IF_ERROR(exec->WriteStdin(slice));
        watchdog->Progress(slice.size());
        data.remove_prefix(slice.size());
      }
      return absl::OkStatus();
    });
    exec->CloseStdin();
  }
  std::string err;
  absl::Status output_status;
  while (std::optional<Exec::Chunk> chunk = exec->ReadOutput()) {
    watchdog->Progress(chunk->data.size());
    if (chunk->is_stderr) {
      if (err.size() < kMaxStderr) {
        err.append(chunk->data.substr(0, kMaxStderr - err.size()));
      }
    } else if (output_status.ok()) {
      output_status = output ? output(chunk->data) : absl::OkStatus();
      if (!output_status.ok()) {
        exec->Signal(9);  // nothing more of its output is wanted
      }
    }
  }
  absl::StatusOr<proto::ExitInfo> waited = exec->Wait();
  std::string missed = watchdog->missed();
  watchdog.reset();  // the tool is over: no kill from here on
  if (!missed.empty()) {
    // The deadline's verdict wins over whatever the cut-short run returned.
    return absl::DeadlineExceededError(absl::StrCat(
        missed, ". Retry; if it recurs, stop the sandbox (abox stop) and create a new one"));
  }
  ABOX_ASSIGN_OR_RETURN(proto::ExitInfo exit, std::move(waited));
  if (!exit.error.empty()) {
    return absl::InternalError(absl::StrCat(what, " could not start in the sandbox: ", exit.error,
                                            " (rebuild the image: abox image build --force)"));
  }
  if (!output_status.ok()) {
    return output_status;
  }
  if (exit.ShellCode() != 0) {
    std::string detail(absl::StripAsciiWhitespace(err));
    return absl::InternalError(absl::StrCat(what, " failed in the sandbox (exit ", exit.ShellCode(),
                                            ")", detail.empty() ? "" : ": ", detail));
  }
  // The tool exited 0 but stopped reading early: its input was not all taken.
  return input_status;
}

}  // namespace abox::runtime
