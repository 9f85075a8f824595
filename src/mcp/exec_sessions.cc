#include "src/mcp/exec_sessions.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"
#include "src/mcp/text.h"

namespace abox::mcp {

ExecSession::ExecSession(std::string sandbox_id, std::string exec_id,
                         std::unique_ptr<client::ApiClient> reader)
    : sandbox_id_(std::move(sandbox_id)),
      exec_id_(std::move(exec_id)),
      reader_(std::move(reader)) {}

ExecSession::~ExecSession() {
  Detach();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void ExecSession::StartReader(std::string exec_path) {
  thread_ = std::thread([this, path = std::move(exec_path)] {
    std::optional<api::Exec> ended;
    std::string problem;
    absl::Status s =
        reader_->StreamNdjson(absl::StrCat(path, "/output"), [&](const nlohmann::json& json) {
          absl::StatusOr<api::OutputLine> line = api::DecodeOutputLine(json);
          if (!line.ok()) {
            problem = std::string(line.status().message());
            return false;
          }
          switch (line->type) {
            case api::OutputLine::Type::kOutput:
              Append(line->chunk.stream == "stderr", std::move(line->chunk.data));
              return true;
            case api::OutputLine::Type::kExit:
              ended = std::move(line->exec);
              return false;
            default:
              return true;  // truncated (aboxd dropped output nobody read yet), or newer types
          }
        });
    if (!ended && problem.empty()) {
      problem = s.ok() ? "the output stream ended without the command's result"
                       : std::string(s.message());
    }
    Finish(std::move(ended), std::move(problem));
  });
}

void ExecSession::Append(bool stderr_stream, std::string data) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = static_cast<int64_t>(data.size());
  (stderr_stream ? stderr_bytes_ : stdout_bytes_) += n;
  kept_ += data.size();
  pieces_.push_back(Piece{total_, stderr_stream, std::move(data)});
  total_ += n;
  while (kept_ > kKeptBytes && pieces_.size() > 1) {
    kept_ -= pieces_.front().data.size();
    pieces_.pop_front();
  }
  cv_.notify_all();
}

void ExecSession::Finish(std::optional<api::Exec> exec, std::string error) {
  std::lock_guard<std::mutex> lock(mu_);
  ended_ = true;
  result_ = std::move(exec);
  lost_ = std::move(error);
  finished_ = absl::Now();
  cv_.notify_all();
}

ExecRead ExecSession::Read(int64_t cursor, size_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  ExecRead out;
  cursor = std::max<int64_t>(0, std::min(cursor, total_));
  int64_t oldest = pieces_.empty() ? total_ : pieces_.front().offset;
  if (cursor < oldest) {
    out.dropped_bytes = oldest - cursor;
    cursor = oldest;
  }
  std::string out_bytes, err_bytes;
  size_t taken = 0;
  int64_t at = cursor;
  for (const Piece& p : pieces_) {
    int64_t end = p.offset + static_cast<int64_t>(p.data.size());
    if (end <= at) {
      continue;
    }
    if (taken >= max_bytes) {
      out.more = true;
      break;
    }
    size_t from = static_cast<size_t>(at - p.offset);
    size_t n = std::min(p.data.size() - from, max_bytes - taken);
    // A cut inside the piece ends before a UTF-8 continuation byte, so that a character is
    // not split between two reads (unless the budget is smaller than one).
    size_t whole = n;
    while (from + n < p.data.size() && n > 0 &&
           (static_cast<unsigned char>(p.data[from + n]) & 0xC0) == 0x80) {
      --n;
    }
    if (n == 0) {
      n = whole;
    }
    (p.stderr_stream ? err_bytes : out_bytes).append(p.data, from, n);
    taken += n;
    at += static_cast<int64_t>(n);
  }
  if (at < total_) {
    out.more = true;
  }
  out.next_cursor = at;
  out.stdout_text = SanitizeUtf8(out_bytes);
  out.stderr_text = SanitizeUtf8(err_bytes);
  return out;
}

std::string ExecSession::OutputBytes(bool stderr_stream) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string bytes;
  for (const Piece& p : pieces_) {
    if (p.stderr_stream == stderr_stream) {
      bytes += p.data;
    }
  }
  return bytes;
}

std::string ExecSession::Output(bool stderr_stream) {
  return SanitizeUtf8(OutputBytes(stderr_stream));
}

ExecState ExecSession::State() {
  std::lock_guard<std::mutex> lock(mu_);
  ExecState s;
  s.ended = ended_;
  s.stdout_bytes = stdout_bytes_;
  s.stderr_bytes = stderr_bytes_;
  s.duration_ms = absl::ToInt64Milliseconds((ended_ ? finished_ : absl::Now()) - started_);
  if (result_) {
    s.state = result_->state;
    s.exit_code = result_->exit_code;
    s.signal = result_->signal;
    s.timed_out = result_->timed_out;
    s.error = result_->error;
    s.oom_kills = result_->oom_kills;
    if (result_->started_at && result_->finished_at) {
      s.duration_ms = absl::ToInt64Milliseconds(*result_->finished_at - *result_->started_at);
    }
  } else if (ended_) {
    s.state = "lost";
    s.error = lost_;
  } else {
    s.state = "running";
  }
  return s;
}

bool ExecSession::WaitFor(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] { return ended_ || interrupted_; });
  interrupted_ = false;
  return ended_;
}

void ExecSession::WaitForOutput(int64_t cursor, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
               [&] { return ended_ || interrupted_ || total_ > cursor; });
  interrupted_ = false;
}

void ExecSession::Interrupt() {
  std::lock_guard<std::mutex> lock(mu_);
  interrupted_ = true;
  cv_.notify_all();
}

void ExecSession::Detach() { reader_->Cancel(); }

absl::StatusOr<std::shared_ptr<ExecSession>> ExecSessions::Start(const std::string& sandbox,
                                                                 api::ExecCreate create,
                                                                 const std::string& stdin_bytes,
                                                                 bool close_stdin) {
  create.kill_on_disconnect = true;
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = daemon_.NewClient();
  if (!api.ok()) {
    return api.status();
  }
  absl::StatusOr<client::ApiResponse> started =
      (*api)->Post(client::SandboxPath(sandbox, "/execs"), api::ToJson(create));
  if (!started.ok()) {
    return started.status();
  }
  absl::StatusOr<api::Exec> exec =
      client::DecodeAnswer(*started, "POST /v1/sandboxes/{id}/execs", api::DecodeExec);
  if (!exec.ok()) {
    return exec.status();
  }
  std::string sandbox_id = exec->sandbox_id.empty() ? sandbox : exec->sandbox_id;
  absl::StatusOr<std::unique_ptr<client::ApiClient>> reader =
      client::ApiClient::Create((*api)->socket_path());
  if (!reader.ok()) {
    return reader.status();
  }
  auto session = std::make_shared<ExecSession>(sandbox_id, exec->id, *std::move(reader));
  session->StartReader(client::ExecPath(sandbox_id, exec->id));
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_[exec->id] = session;
    order_.push_back(exec->id);
    // Forget the oldest ended commands beyond the cap (running ones stay).
    for (auto it = order_.begin(); sessions_.size() > kMaxSessions && it != order_.end();) {
      auto found = sessions_.find(*it);
      if (found != sessions_.end() && found->second->State().ended) {
        sessions_.erase(found);
        it = order_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (create.stdin_open && (!stdin_bytes.empty() || close_stdin)) {
    absl::Status written = WriteStdin(*session, stdin_bytes, close_stdin);
    if (!written.ok()) {
      (void)Signal(*session, "KILL");  // it would wait for input that never comes
      return written;
    }
  }
  return session;
}

absl::StatusOr<std::shared_ptr<ExecSession>> ExecSessions::Find(const std::string& exec_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(exec_id);
  if (it == sessions_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "no command \"", exec_id,
        "\" started by this abox-mcp (handles come from exec_start; old ended ones are "
        "forgotten after ",
        kMaxSessions, " commands)"));
  }
  return it->second;
}

absl::Status ExecSessions::Signal(const ExecSession& session, const std::string& signal) {
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = daemon_.NewClient();
  if (!api.ok()) {
    return api.status();
  }
  (*api)->set_timeout(absl::Seconds(10));
  absl::Status s = (*api)
                       ->Post(client::ExecPath(session.sandbox_id(), session.id(), "/signal"),
                              api::SignalRequestToJson(signal))
                       .status();
  if (s.code() == absl::StatusCode::kFailedPrecondition) {
    return absl::OkStatus();  // it already ended: nothing left to signal
  }
  return s;
}

absl::Status ExecSessions::WriteStdin(const ExecSession& session, const std::string& bytes,
                                      bool eof) {
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = daemon_.NewClient();
  if (!api.ok()) {
    return api.status();
  }
  (*api)->set_timeout(absl::Seconds(30));
  std::string target = client::ExecPath(session.sandbox_id(), session.id(), "/stdin");
  if (eof) {
    target = client::WithQuery(target, {{"eof", "true"}});
  }
  return (*api)->PostBytes(target, bytes).status();
}

void ExecSessions::KillAll() {
  std::vector<std::shared_ptr<ExecSession>> running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, session] : sessions_) {
      if (!session->State().ended) {
        running.push_back(session);
      }
    }
  }
  for (const auto& session : running) {
    (void)Signal(*session, "KILL");  // best effort: leaving the stream kills it too
    session->Detach();
  }
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.clear();
  order_.clear();
}

}  // namespace abox::mcp
