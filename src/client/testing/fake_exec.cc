// The exec half of the fake sandbox API: execs run their argv as local processes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/api/errors.h"
#include "src/base/io.h"
#include "src/client/testing/fake_api_state.h"

extern char** environ;

namespace abox::client::testing {
namespace {

using daemon::http::Request;
using daemon::http::Responder;
using daemon::http::RouteOptions;
using daemon::http::Router;
using daemon::http::Stream;
using nlohmann::json;

std::shared_ptr<Exec> FindExec(Sandbox& s, const std::string& id) {
  for (const auto& e : s.execs) {
    if (e->id == id) {
      return e;
    }
  }
  return nullptr;
}

}  // namespace

json Exec::ToJson(bool with_output) const {
  json j = {{"id", id},
            {"sandbox_id", sandbox_id},
            {"state", state},
            {"started_at", ApiTime(started)},
            {"timed_out", timed_out},
            {"timeout_ms", request.value("timeout_ms", 0)}};
  if (request.contains("argv")) {
    j["argv"] = request["argv"];
  }
  if (request.contains("shell")) {
    j["shell"] = request["shell"];
  }
  if (exit_code) {
    j["exit_code"] = *exit_code;
  }
  if (signal) {
    j["signal"] = *signal;
  }
  if (!error.empty()) {
    j["error"] = error;
  }
  if (finished) {
    j["finished_at"] = ApiTime(*finished);
  }
  if (with_output) {
    j["output"] = chunks;
  }
  return j;
}

void FakeSandboxApi::State::Kill(Exec& e, int sig, bool group) {
  if (!e.reaped) {
    if (group) {
      ::kill(-e.pid, sig);
    } else {
      ::syscall(SYS_pidfd_send_signal, e.child.pidfd(), sig, nullptr, 0);
    }
  }
}

void FakeSandboxApi::State::AddChunk(Exec& e, const char* stream, const std::string& bytes) {
  bool ascii = true;
  for (char c : bytes) {
    ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  }
  json chunk = {{"seq", e.next_seq++}, {"stream", stream}};
  if (ascii) {
    chunk["data"] = bytes;
  } else {
    chunk["data_b64"] = absl::Base64Escape(bytes);
  }
  e.chunks.push_back(chunk);
  chunk["type"] = "output";
  for (auto& [_, reader] : e.readers) {
    reader.WriteJson(chunk);
  }
}

void FakeSandboxApi::State::Pump(std::shared_ptr<Exec> e, base::UniqueFd out, base::UniqueFd err) {
  std::optional<absl::Time> deadline;
  int64_t timeout_ms = e->request.value("timeout_ms", 0);
  if (timeout_ms > 0) {
    deadline = e->started + absl::Milliseconds(timeout_ms);
  }
  pollfd fds[2] = {{out.get(), POLLIN, 0}, {err.get(), POLLIN, 0}};
  int open = 2;
  char buf[16384];
  while (open > 0) {
    int wait = -1;
    if (deadline) {
      wait = std::max<int>(0, absl::ToInt64Milliseconds(*deadline - absl::Now()));
    }
    int n = ::poll(fds, 2, wait);
    if (n == 0 && deadline) {
      std::lock_guard<std::recursive_mutex> lock(mu);
      Kill(*e, SIGKILL, true);
      e->timed_out = true;
      deadline.reset();
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) {
        continue;
      }
      ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (got <= 0) {
        fds[i].fd = -1;
        --open;
        continue;
      }
      std::lock_guard<std::recursive_mutex> lock(mu);
      AddChunk(*e, i == 0 ? "stdout" : "stderr", std::string(buf, static_cast<size_t>(got)));
    }
  }
  absl::StatusOr<base::ExitStatus> status = e->child.Wait();
  std::lock_guard<std::recursive_mutex> lock(mu);
  e->reaped = true;
  e->stdin_fd.reset();
  e->finished = absl::Now();
  if (e->state == "running") {
    e->state = "exited";
  }
  if (status.ok()) {
    e->exit_code = status->exit_code;
    e->signal = status->signal;
  }
  json exit_line = {{"type", "exit"}, {"exec", e->ToJson(false)}};
  for (auto& [_, reader] : e->readers) {
    reader.WriteJson(exit_line);
    reader.Finish();
  }
  e->readers.clear();
  Emit("exec_finished", e->sandbox_id,
       {{"exec_id", e->id}, {"exit_code", e->exit_code.value_or(-1)}});
}

void AddExecRoutes(const std::shared_ptr<FakeSandboxApi::State>& st, Router& router) {
  // The routes of one exec: `fn(exec)` under the lock, or 404.
  auto with_exec = [st](Request& req, Responder& out, auto fn) {
    WithSandbox(*st, req, out, [&](Sandbox& s) {
      std::shared_ptr<Exec> e = FindExec(s, req.Param("exec"));
      if (!e) {
        return out.Error(absl::NotFoundError(absl::StrCat("no exec ", req.Param("exec"))));
      }
      fn(e);
    });
  };

  (void)router.Add(
      "GET", "/v1/sandboxes/{id}/execs", [st, with_exec](Request& req, Responder& out) {
        bool output = req.Query("output") == std::optional<std::string>("true");
        size_t limit = 100;
        if (std::optional<std::string> text = req.Query("limit")) {
          (void)absl::SimpleAtoi(*text, &limit);
        }
        WithSandbox(*st, req, out, [&](Sandbox& s) {
          json list = json::array();
          for (auto it = s.execs.rbegin(); it != s.execs.rend() && list.size() < limit; ++it) {
            list.push_back((*it)->ToJson(output));
          }
          out.Json(200, {{"execs", list}});
        });
      });

  (void)router.Add(
      "POST", "/v1/sandboxes/{id}/execs",
      [st, with_exec](Request& req, Responder& out) {
        json body = json::parse(req.body, nullptr, false);
        if (!body.is_object() || !body.contains("argv") || !body["argv"].is_array() ||
            body["argv"].empty()) {
          return out.Error(absl::InvalidArgumentError("argv: required"));
        }
        WithSandbox(*st, req, out, [&](Sandbox& s) {
          if (s.record["state"] != "ready") {
            return out.Error(absl::FailedPreconditionError("the sandbox is not ready"));
          }
          auto e = std::make_shared<Exec>();
          e->id = absl::StrCat("e", s.execs.size() + 1, "x", st->next_id++);
          e->sandbox_id = s.record["id"];
          e->request = body;
          s.execs.push_back(e);
          st->all_execs.push_back(e);
          base::SpawnOptions o;
          o.argv = body["argv"].get<std::vector<std::string>>();
          std::vector<std::string> env;
          for (char** v = environ; *v != nullptr; ++v) {
            env.emplace_back(*v);
          }
          json env_overrides = body.value("env", json::object());
          for (const auto& [k, v] : env_overrides.items()) {
            env.push_back(absl::StrCat(k, "=", v.get<std::string>()));
          }
          o.env = env;
          o.new_session = true;
          if (body.value("cwd", "") != "") {
            o.cwd = body["cwd"].get<std::string>();
          }
          absl::StatusOr<base::Pipe> in = base::MakePipe();
          absl::StatusOr<base::Pipe> outp = base::MakePipe();
          absl::StatusOr<base::Pipe> errp = base::MakePipe();
          if (!in.ok() || !outp.ok() || !errp.ok()) {
            return out.Error(absl::InternalError("pipe"));
          }
          o.stdin_fd = body.value("stdin", false) ? in->read.get() : -1;
          o.stdout_fd = outp->write.get();
          o.stderr_fd = errp->write.get();
          absl::StatusOr<base::ChildProcess> child = base::ChildProcess::Spawn(o);
          if (!child.ok()) {
            e->state = "failed";
            e->error = absl::StrCat(o.argv[0], ": command not found");
            e->finished = absl::Now();
            return out.Json(201, e->ToJson(false));
          }
          e->child = *std::move(child);
          e->pid = e->child.pid();
          e->reaped = false;
          e->stdin_fd = std::move(in->write);
          st->Emit("exec_started", e->sandbox_id, {{"exec_id", e->id}});
          e->pump = std::thread(&FakeSandboxApi::State::Pump, st.get(), e, std::move(outp->read),
                                std::move(errp->read));
          out.Json(201, e->ToJson(false));
        });
      },
      RouteOptions{.blocking = true});

  (void)router.Add(
      "GET", "/v1/sandboxes/{id}/execs/{exec}/output",
      [st, with_exec](Request& req, Responder& out) {
        with_exec(req, out, [&](const std::shared_ptr<Exec>& e) {
          Stream stream = out.StartNdjson();
          for (const json& chunk : e->chunks) {
            json line = chunk;
            line["type"] = "output";
            stream.WriteJson(line);
          }
          if (e->state != "running") {
            stream.WriteJson({{"type", "exit"}, {"exec", e->ToJson(false)}});
            stream.Finish();
            return;
          }
          int reader = st->next_id++;
          e->readers.emplace(reader, stream);
          std::weak_ptr<Exec> weak = e;
          stream.OnCancel([st, weak, reader] {
            std::lock_guard<std::recursive_mutex> lock(st->mu);
            std::shared_ptr<Exec> exec = weak.lock();
            if (!exec) {
              return;
            }
            exec->readers.erase(reader);
            if (exec->readers.empty() && exec->request.value("kill_on_disconnect", false)) {
              exec->stdin_fd.reset();
              FakeSandboxApi::State::Kill(*exec, SIGKILL, true);
            }
          });
        });
      });

  (void)router.Add(
      "POST", "/v1/sandboxes/{id}/execs/{exec}/stdin",
      [st, with_exec](Request& req, Responder& out) {
        // Writes outside the lock: the command may only read more once its output was taken.
        base::UniqueFd fd;
        with_exec(req, out, [&](const std::shared_ptr<Exec>& e) {
          if (!e->stdin_fd) {
            return out.Error(absl::FailedPreconditionError("stdin of this exec is closed"));
          }
          fd.reset(::fcntl(e->stdin_fd.get(), F_DUPFD_CLOEXEC, 0));
        });
        if (!fd) {
          return;
        }
        if (!base::WriteAll(fd.get(), req.body).ok()) {
          return out.Error(absl::FailedPreconditionError("the command stopped reading stdin"));
        }
        fd.reset();
        if (req.Query("eof") == std::optional<std::string>("true")) {
          with_exec(req, out, [&](const std::shared_ptr<Exec>& e) { e->stdin_fd.reset(); });
        }
        if (!out.responded()) {
          out.Send(204, "", "");
        }
      },
      RouteOptions{.blocking = true});

  (void)router.Add(
      "POST", "/v1/sandboxes/{id}/execs/{exec}/signal",
      [st, with_exec](Request& req, Responder& out) {
        json body = json::parse(req.body, nullptr, false);
        static const std::map<std::string, int> kNames = {
            {"INT", SIGINT},   {"TERM", SIGTERM}, {"HUP", SIGHUP},  {"QUIT", SIGQUIT},
            {"PIPE", SIGPIPE}, {"KILL", SIGKILL}, {"USR1", SIGUSR1}};
        int sig = 0;
        if (body.is_object() && body["signal"].is_number_integer()) {
          sig = body["signal"].get<int>();
        } else if (body.is_object() && body["signal"].is_string() &&
                   kNames.count(body["signal"].get<std::string>()) != 0) {
          sig = kNames.at(body["signal"].get<std::string>());
        }
        if (sig <= 0 || sig > 64) {
          return out.Error(api::WithField(absl::InvalidArgumentError("unknown signal"), "signal"));
        }
        with_exec(req, out, [&](const std::shared_ptr<Exec>& e) {
          if (e->state != "running") {
            return out.Error(absl::FailedPreconditionError("the exec has ended"));
          }
          FakeSandboxApi::State::Kill(*e, sig, false);
          out.Send(204, "", "");
        });
      });

  (void)router.Add(
      "POST", "/v1/sandboxes/{id}/execs/{exec}/resize",
      [st, with_exec](Request& req, Responder& out) {
        with_exec(req, out, [&](const std::shared_ptr<Exec>& e) {
          if (!e->request.contains("pty")) {
            return out.Error(absl::FailedPreconditionError("this exec has no terminal"));
          }
          out.Send(204, "", "");
        });
      });
}

}  // namespace abox::client::testing
