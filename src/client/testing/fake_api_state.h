// Internal to the fake sandbox API (fake_sandbox_api.cc: sandboxes and events; fake_exec.cc:
// execs): its records and shared state, all guarded by State::mu.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/base/child_process.h"
#include "src/base/unique_fd.h"
#include "src/client/testing/fake_sandbox_api.h"
#include "src/daemon/http/responder.h"
#include "src/daemon/http/router.h"

namespace abox::client::testing {

// RFC 3339 with milliseconds, UTC.
std::string ApiTime(absl::Time t);

struct Exec {
  std::string id;
  std::string sandbox_id;
  nlohmann::json request;  // the ExecCreate body
  std::string state = "running";
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool timed_out = false;
  std::string error;
  absl::Time started = absl::Now();
  std::optional<absl::Time> finished;
  std::vector<nlohmann::json> chunks;  // OutputChunk objects
  int64_t next_seq = 1;
  std::map<int, daemon::http::Stream> readers;  // live GET .../output streams
  base::ChildProcess child;
  pid_t pid = -1;
  bool reaped = true;
  base::UniqueFd stdin_fd;
  std::thread pump;

  // The API's Exec object.
  [[nodiscard]] nlohmann::json ToJson(bool with_output) const;
};

struct Sandbox {
  nlohmann::json record;  // the API's Sandbox object, minus running_execs
  std::vector<std::shared_ptr<Exec>> execs;
};

struct FakeSandboxApi::State {
  // Recursive: a Stream's OnCancel callback runs on the registering thread, which holds it,
  // when the client is already gone.
  std::recursive_mutex mu;
  // Every exec ever started: they die only with the API, after their threads were joined.
  std::vector<std::shared_ptr<Exec>> all_execs;
  std::vector<std::shared_ptr<Sandbox>> sandboxes;  // newest last
  std::vector<nlohmann::json> events;
  std::map<int, std::pair<std::string, daemon::http::Stream>> listeners;  // sandbox filter, SSE
  int next_id = 1;

  // Records an event and sends it to the listeners.
  void Emit(const std::string& type, const std::string& sandbox_id, nlohmann::json payload);
  // The sandbox with this id, name or unique id prefix (3+), or null.
  std::shared_ptr<Sandbox> Find(const std::string& key);
  // The API's Sandbox object.
  nlohmann::json SandboxJson(const Sandbox& s);
  // Signals a running exec's process (or its whole process group).
  static void Kill(Exec& e, int sig, bool group);
  // Keeps a piece of output and sends it to the exec's readers.
  void AddChunk(Exec& e, const char* stream, const std::string& bytes);
  // The thread of a running exec: reads its output, enforces its timeout, reaps it and sends
  // the `exit` line. Takes mu only around state changes.
  void Pump(std::shared_ptr<Exec> e, base::UniqueFd out, base::UniqueFd err);
};

// Runs `fn(sandbox)` under the lock for the request's {id}, or answers 404.
template <typename Fn>
void WithSandbox(FakeSandboxApi::State& st, daemon::http::Request& req,
                 daemon::http::Responder& out, Fn fn) {
  std::lock_guard<std::recursive_mutex> lock(st.mu);
  std::shared_ptr<Sandbox> s = st.Find(req.Param("id"));
  if (!s) {
    out.Error(
        absl::NotFoundError("no sandbox \"" + req.Param("id") + "\"; list them with `abox ls -a`"));
    return;
  }
  fn(*s);
}

// Stops a sandbox: its running execs end as interrupted. Caller holds mu.
void StopSandbox(FakeSandboxApi::State& st, Sandbox& s);

// The routes of /v1/sandboxes/{id}/execs...
void AddExecRoutes(const std::shared_ptr<FakeSandboxApi::State>& st, daemon::http::Router& router);

}  // namespace abox::client::testing
