#include "src/daemon/services/live_exec.h"

#include <csignal>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"
#include "src/api/exec.h"
#include "src/daemon/resource_views.h"

namespace abox::daemon {

int64_t ReplayOutput(const store::ExecWithOutput& exec, int64_t after, const OutputSink& sink) {
  int64_t last = after;
  bool first = true;
  for (const store::OutputChunk& c : exec.output) {
    if (c.seq <= after) {
      continue;
    }
    if (first && c.seq > after + 1) {
      sink.write(api::ToJson(api::OutputLine::Truncated(c.seq)), nullptr);
    }
    first = false;
    sink.write(OutputLineJson(c.seq, c.stream, c.data), nullptr);
    last = c.seq;
  }
  if (exec.exec.state != store::ExecState::kRunning) {
    sink.write(ExitLineJson(exec.exec), nullptr);
  }
  return last;
}

std::shared_ptr<LiveExec> LiveExec::Start(std::unique_ptr<runtime::Exec> exec,
                                          store::ExecRecord record, Options options,
                                          store::ExecRepo& repo, EventBus& events, DoneFn on_done) {
  std::shared_ptr<LiveExec> live(
      new LiveExec(std::move(exec), std::move(record), options, repo, events, std::move(on_done)));
  live->pump_ = std::thread([raw = live.get()] { raw->Pump(); });
  return live;
}

LiveExec::LiveExec(std::unique_ptr<runtime::Exec> exec, store::ExecRecord record, Options options,
                   store::ExecRepo& repo, EventBus& events, DoneFn on_done)
    : exec_(std::move(exec)),
      record_(std::move(record)),
      options_(options),
      repo_(&repo),
      events_(&events),
      on_done_(std::move(on_done)) {}

LiveExec::~LiveExec() {
  // The last reference can go away on the pump thread itself (its on_done callback).
  for (std::thread* t : {&pump_, &stdin_thread_}) {
    if (t->joinable()) {
      if (t->get_id() == std::this_thread::get_id()) {
        t->detach();
      } else {
        t->join();
      }
    }
  }
}

bool LiveExec::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

void LiveExec::WriteToReaders(const nlohmann::json& line, size_t bytes) {
  for (auto it = readers_.begin(); it != readers_.end();) {
    std::shared_ptr<std::atomic<size_t>> unsent = it->second.unsent;
    *unsent += bytes;
    std::weak_ptr<LiveExec> weak = weak_from_this();
    bool ok = it->second.sink.write(line, [unsent, bytes, weak] {
      *unsent -= bytes;
      if (auto self = weak.lock()) {
        std::lock_guard lock(self->mu_);
        self->cv_.notify_all();
      }
    });
    it = ok ? std::next(it) : readers_.erase(it);
  }
  // A reader whose stream is gone may be noticed here before its Detach() comes: that is its
  // client dying too.
  KillIfLastReaderLeftLocked();
}

void LiveExec::KillIfLastReaderLeftLocked() {
  if (readers_.empty() && had_reader_ && options_.kill_on_disconnect && !done_ && exec_ &&
      !killed_) {
    spdlog::info("exec {}: its last reader went away; killing it (kill_on_disconnect)", record_.id);
    KillLocked("");
  }
}

void LiveExec::Pump() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      // Flow control: wait while a reader is more than a window behind. A reader that stops
      // reading is cut off by the server (write timeout, buffer cap) and detached.
      while (interrupt_reason_.empty()) {
        bool behind = false;
        for (const auto& [handle, reader] : readers_) {
          behind = behind || *reader.unsent > kReaderWindow;
        }
        if (!behind) {
          break;
        }
        cv_.wait_for(lock, std::chrono::milliseconds(200));
      }
    }
    absl::Time flush_at = absl::InfiniteFuture();
    {
      std::lock_guard lock(mu_);
      if (!pending_.empty() && absl::Now() >= flush_at_) {
        FlushLocked();  // output that keeps coming is kept every kStoreBatchDelay too
      } else if (!pending_.empty()) {
        flush_at = flush_at_;
      }
    }
    if (flush_at != absl::InfiniteFuture() && !exec_->WaitForOutput(flush_at)) {
      std::lock_guard lock(mu_);
      FlushLocked();  // the output stopped for a while: what came is kept now
      continue;
    }
    std::optional<runtime::Exec::Chunk> chunk = exec_->ReadOutput();
    if (!chunk) {
      break;
    }
    store::ExecStream stream =
        chunk->is_stderr ? store::ExecStream::kStderr : store::ExecStream::kStdout;
    std::lock_guard lock(mu_);
    ++seq_;
    nlohmann::json line = OutputLineJson(seq_, stream, chunk->data);
    const size_t bytes = chunk->data.size();
    if (pending_.empty()) {
      flush_at_ = absl::Now() + kStoreBatchDelay;
    }
    pending_bytes_ += bytes;
    pending_.push_back({stream, std::move(chunk->data)});
    // What a reader is shown is in the log first, so that a kill -9 of aboxd loses none of it;
    // a reader also paces the pump (and the runtime coalesces what queued meanwhile).
    if (pending_bytes_ >= kStoreBatchBytes || !readers_.empty()) {
      FlushLocked();
    }
    WriteToReaders(line, bytes);
  }
  {
    std::lock_guard lock(mu_);
    FlushLocked();
  }
  absl::StatusOr<proto::ExitInfo> info = exec_->Wait();
  store::ExecResult result = ResultOf(info);
  if (absl::Status s = repo_->Finish(record_.id, result); !s.ok()) {
    spdlog::warn("exec {}: cannot record the result: {}", record_.id, s.ToString());
  }
  store::ExecRecord final_record = record_;
  if (absl::StatusOr<store::ExecRecord> stored = repo_->Get(record_.id); stored.ok()) {
    final_record = *std::move(stored);
  } else {
    final_record.state = result.state;
    final_record.result = result;
    final_record.finished_at = absl::Now();
  }
  nlohmann::json payload = {{"exec_id", record_.id}, {"state", store::ExecStateName(result.state)}};
  if (result.exit_code) {
    payload["exit_code"] = *result.exit_code;
  }
  if (result.signal) {
    payload["signal"] = *result.signal;
  }
  if (!result.error.empty()) {
    payload["error"] = result.error;
  }
  if (result.oom_kills > 0) {
    payload["oom_kills"] = result.oom_kills;
  }
  events_->Publish(record_.sandbox_id, store::event_type::kExecFinished, payload);

  std::vector<std::function<void(const store::ExecRecord&)>> waiters;
  {
    std::lock_guard lock(mu_);
    done_ = true;
    final_ = final_record;
    waiters.swap(waiters_);
    nlohmann::json exit_line = ExitLineJson(final_);
    for (auto& [handle, reader] : readers_) {
      reader.sink.write(exit_line, nullptr);
      reader.sink.finish();
    }
    readers_.clear();
    cv_.notify_all();
  }
  for (auto& w : waiters) {
    w(final_record);
  }
  if (on_done_) {
    on_done_(final_record);
  }
}

store::ExecResult LiveExec::ResultOf(const absl::StatusOr<proto::ExitInfo>& info) {
  store::ExecResult r;
  if (!info.ok()) {
    std::lock_guard lock(mu_);
    r.state = store::ExecState::kInterrupted;
    r.error = interrupt_reason_.empty() ? std::string(info.status().message()) : interrupt_reason_;
    return r;
  }
  r.exit_code = info->exit_code;
  r.signal = info->signal;
  r.timed_out = info->timed_out;
  r.oom_kills = info->oom_kills;  // bounded by the decoder (proto::kMaxOomKills)
  if (!info->error.empty()) {
    r.state = store::ExecState::kFailed;
    r.error = info->error;
  } else {
    r.state = store::ExecState::kExited;
    std::lock_guard lock(mu_);
    r.error = kill_reason_;  // empty unless aboxd killed it, and then it says why
  }
  return r;
}

void LiveExec::FlushLocked() {
  if (pending_.empty()) {
    return;
  }
  if (absl::Status s = repo_->AppendBatch(record_.id, pending_); !s.ok()) {
    spdlog::warn("exec {}: cannot keep {} bytes of output: {}", record_.id, pending_bytes_,
                 s.ToString());
  }
  pending_.clear();
  pending_bytes_ = 0;
}

absl::StatusOr<uint64_t> LiveExec::Attach(int64_t after, OutputSink sink) {
  std::unique_lock lock(mu_);
  FlushLocked();  // the replay below reads the log, which must hold seq 1..seq_
  absl::StatusOr<store::ExecWithOutput> kept = repo_->GetWithOutput(record_.id);
  if (!kept.ok()) {
    return kept.status();
  }
  if (done_) {
    lock.unlock();
    ReplayOutput(*kept, after, sink);
    sink.finish();
    return 0;
  }
  // Running: the store holds exactly seq 1..seq_ (minus dropped ones) while we hold the lock.
  kept->exec.state = store::ExecState::kRunning;
  ReplayOutput(*kept, after, sink);
  uint64_t handle = next_reader_++;
  readers_.emplace(handle, Reader{std::move(sink), std::make_shared<std::atomic<size_t>>(0)});
  had_reader_ = true;
  return handle;
}

void LiveExec::Detach(uint64_t reader) {
  std::lock_guard lock(mu_);
  if (readers_.erase(reader) == 0) {
    return;
  }
  cv_.notify_all();
  KillIfLastReaderLeftLocked();
}

bool LiveExec::KillIfNeverAttached(absl::Duration deadline) {
  std::lock_guard lock(mu_);
  if (had_reader_ || !options_.kill_on_disconnect || done_ || !exec_ || killed_) {
    return false;
  }
  std::string why = absl::StrCat(
      "killed by aboxd: no client read its output within ", absl::FormatDuration(deadline),
      " of its start (kill_on_disconnect; its client is gone). Attach to /output right after "
      "starting it, or start it without kill_on_disconnect");
  spdlog::info("exec {}: {}", record_.id, why);
  KillLocked(why);
  return true;
}

void LiveExec::KillLocked(const std::string& why) {
  if (kill_reason_.empty()) {
    kill_reason_ = why;
  }
  killed_ = true;
  if (options_.stdin_open && !stdin_closed_) {
    stdin_closed_ = true;
    exec_->CloseStdin();
  }
  exec_->Signal(SIGKILL);
}

void LiveExec::WriteStdin(std::string data, bool eof, std::function<void(absl::Status)> done) {
  std::unique_lock lock(mu_);
  absl::Status refused;
  if (!options_.stdin_open) {
    refused =
        absl::FailedPreconditionError(absl::StrCat("exec ", record_.id,
                                                   " was started without stdin: start it with "
                                                   "\"stdin\": true to send input"));
  } else if (done_ || !exec_) {
    refused = absl::FailedPreconditionError(absl::StrCat("exec ", record_.id, " has ended"));
  } else if (stdin_closed_) {
    refused = absl::FailedPreconditionError(
        absl::StrCat("the stdin of exec ", record_.id, " was already closed (eof)"));
  } else if (stdin_bytes_ + data.size() > kMaxStdinBacklog) {
    refused = absl::ResourceExhaustedError(
        absl::StrCat("exec ", record_.id, " is not reading its stdin: ", stdin_bytes_,
                     " bytes are already waiting; retry later or close stdin"));
  } else if (options_.stdin_check) {
    refused = options_.stdin_check(data);
  }
  if (!refused.ok()) {
    lock.unlock();
    done(refused);
    return;
  }
  stdin_closed_ = eof;
  stdin_bytes_ += data.size();
  stdin_.push_back({std::move(data), eof, std::move(done)});
  if (!stdin_thread_started_) {
    stdin_thread_started_ = true;
    stdin_thread_ = std::thread([this] { StdinLoop(); });
  }
  cv_.notify_all();
}

void LiveExec::StdinLoop() {
  for (;;) {
    StdinItem item;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !stdin_.empty() || done_ || joined_; });
      if (stdin_.empty()) {
        return;
      }
      item = std::move(stdin_.front());
      stdin_.pop_front();
    }
    absl::Status s = item.data.empty() ? absl::OkStatus() : exec_->WriteStdin(item.data);
    if (s.ok() && item.eof) {
      exec_->CloseStdin();
    }
    {
      std::lock_guard lock(mu_);
      stdin_bytes_ -= item.data.size();
    }
    if (!s.ok()) {
      s = absl::FailedPreconditionError(
          absl::StrCat("exec ", record_.id, " no longer takes stdin: ", s.message()));
    }
    item.done(s);
  }
}

absl::Status LiveExec::Signal(int signal) {
  std::lock_guard lock(mu_);
  if (done_ || !exec_) {
    return absl::FailedPreconditionError(absl::StrCat("exec ", record_.id, " has ended"));
  }
  exec_->Signal(signal);
  return absl::OkStatus();
}

absl::Status LiveExec::Resize(int rows, int cols) {
  std::lock_guard lock(mu_);
  if (!record_.pty) {
    return absl::FailedPreconditionError(
        absl::StrCat("exec ", record_.id, " has no terminal: start it with \"pty\" to resize"));
  }
  if (done_ || !exec_) {
    return absl::FailedPreconditionError(absl::StrCat("exec ", record_.id, " has ended"));
  }
  exec_->Resize(proto::PtySize{static_cast<uint16_t>(rows), static_cast<uint16_t>(cols)});
  return absl::OkStatus();
}

void LiveExec::OnDone(std::function<void(const store::ExecRecord&)> fn) {
  std::unique_lock lock(mu_);
  if (done_) {
    store::ExecRecord copy = final_;
    lock.unlock();
    fn(copy);
    return;
  }
  waiters_.push_back(std::move(fn));
}

void LiveExec::SetInterruptReason(const std::string& reason) {
  std::lock_guard lock(mu_);
  if (interrupt_reason_.empty()) {
    interrupt_reason_ = reason;
  }
  cv_.notify_all();
}

void LiveExec::Join() {
  std::lock_guard join_lock(join_mu_);
  {
    std::lock_guard lock(mu_);
    if (joined_ && !exec_) {
      return;
    }
    joined_ = true;
    cv_.notify_all();
  }
  for (std::thread* t : {&pump_, &stdin_thread_}) {
    if (t->joinable() && t->get_id() != std::this_thread::get_id()) {
      t->join();
    }
  }
  std::lock_guard lock(mu_);
  if (!stdin_thread_.joinable() && !pump_.joinable()) {
    exec_.reset();
  }
}

}  // namespace abox::daemon
