#include "src/daemon/resource_views.h"

#include <algorithm>
#include <optional>
#include <string>

namespace abox::daemon {

api::Sandbox SandboxOf(const store::SandboxRecord& s, const api::SandboxLive& live) {
  api::Sandbox out;
  out.id = s.id;
  out.name = s.name;
  out.image = s.image;
  out.cpus = s.cpus;
  out.memory_mib = s.memory_mib;
  out.disk_mib = s.disk_mib;
  out.disk_used_bytes = live.disk_used_bytes;
  out.labels = s.labels;
  out.state = store::SandboxStateName(s.state);
  out.failure = s.failure;
  out.created_at = s.created_at;
  out.ready_at = s.ready_at;
  out.last_active_at = s.last_active_at;
  out.ttl_seconds = s.ttl_seconds;
  out.idle_timeout_seconds = s.idle_timeout_seconds;
  out.accel = s.accel;
  out.vmm_pid = s.vmm_pid;
  out.running_execs = live.running_execs;
  out.workspace = live.workspace;
  out.egress_mode = live.egress_mode;
  out.dropped = live.dropped;
  out.secrets = live.secrets;
  out.git_push = live.git_push;
  out.models = live.models;
  if (s.state == store::SandboxState::kCreating || s.state == store::SandboxState::kReady) {
    std::optional<absl::Time> expires;
    if (s.ttl_seconds > 0) {
      expires = s.created_at + absl::Seconds(s.ttl_seconds);
    }
    if (s.idle_timeout_seconds > 0 && s.last_active_at && live.running_execs == 0) {
      absl::Time idle = *s.last_active_at + absl::Seconds(s.idle_timeout_seconds);
      expires = expires ? std::min(*expires, idle) : idle;
    }
    out.expires_at = expires;
  }
  return out;
}

nlohmann::json SandboxJson(const store::SandboxRecord& record, const api::SandboxLive& live) {
  return api::ToJson(SandboxOf(record, live));
}

api::Exec ExecOf(const store::ExecRecord& e) {
  api::Exec out;
  out.id = e.id;
  out.sandbox_id = e.sandbox_id;
  out.argv = e.argv;
  out.shell = e.shell;
  out.env = e.env;
  out.cwd = e.cwd;
  out.user = e.user.empty() ? "agent" : e.user;
  out.pty = e.pty;
  out.timeout_ms = e.timeout_ms;
  out.state = store::ExecStateName(e.state);
  if (e.state != store::ExecState::kRunning) {
    if (e.result.exit_code) {
      out.exit_code = *e.result.exit_code;
    }
    if (e.result.signal) {
      out.signal = *e.result.signal;
    }
    out.timed_out = e.result.timed_out;
    out.error = e.result.error;
    out.oom_kills = e.result.oom_kills;
  }
  out.started_at = e.started_at;
  out.finished_at = e.finished_at;
  out.output_bytes = e.output_bytes;
  out.output_truncated = e.output_truncated;
  return out;
}

api::Exec ExecOf(const store::ExecWithOutput& e) {
  api::Exec out = ExecOf(e.exec);
  std::vector<api::OutputChunk> output;
  output.reserve(e.output.size());
  for (const store::OutputChunk& c : e.output) {
    output.push_back(ChunkOf(c.seq, c.stream, c.data));
  }
  out.output = std::move(output);
  return out;
}

nlohmann::json ExecJson(const store::ExecRecord& record) { return api::ToJson(ExecOf(record)); }

nlohmann::json ExecJson(const store::ExecWithOutput& exec) { return api::ToJson(ExecOf(exec)); }

api::OutputChunk ChunkOf(int64_t seq, store::ExecStream stream, absl::string_view data) {
  return {.seq = seq, .stream = store::ExecStreamName(stream), .data = std::string(data)};
}

nlohmann::json OutputLineJson(int64_t seq, store::ExecStream stream, absl::string_view data) {
  return api::ToJson(api::OutputLine::Output(ChunkOf(seq, stream, data)));
}

nlohmann::json ExitLineJson(const store::ExecRecord& record) {
  return api::ToJson(api::OutputLine::Exit(ExecOf(record)));
}

api::Event EventOf(const store::Event& e) {
  return {.seq = e.seq,
          .time = e.time,
          .type = e.type,
          .sandbox_id = e.sandbox_id,
          .payload = e.payload};
}

nlohmann::json EventJson(const store::Event& event) { return api::ToJson(EventOf(event)); }

}  // namespace abox::daemon
