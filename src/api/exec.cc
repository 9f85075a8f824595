#include "src/api/exec.h"

#include <algorithm>
#include <csignal>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/api/errors.h"
#include "src/api/json_body.h"
#include "src/api/wire.h"
#include "src/base/status_macros.h"
#include "src/base/utf8.h"

namespace abox::api {
namespace {

struct SignalName {
  const char* name;
  int number;
};
constexpr SignalName kSignals[] = {
    {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
    {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
    {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"PWR", SIGPWR},       {"SYS", SIGSYS},
};

void ReadChunk(AnswerReader& r, OutputChunk& c) {
  r.Int("seq", &c.seq);
  r.String("stream", &c.stream);
  if (r.Has("data")) {
    r.String("data", &c.data);
  } else {
    r.Base64("data_b64", &c.data);
  }
}

void ReadExec(AnswerReader& r, Exec& e) {
  r.String("id", &e.id);
  r.String("sandbox_id", &e.sandbox_id);
  r.StringArray("argv", &e.argv);
  r.String("shell", &e.shell);
  r.StringMap("env", &e.env);
  r.String("cwd", &e.cwd);
  r.String("user", &e.user);
  r.Bool("pty", &e.pty);
  r.Int("timeout_ms", &e.timeout_ms);
  r.String("state", &e.state);
  r.Int("exit_code", &e.exit_code);
  r.Int("signal", &e.signal);
  r.Bool("timed_out", &e.timed_out);
  r.String("error", &e.error);
  r.Int("oom_kills", &e.oom_kills);
  e.oom_kills = std::max<int64_t>(e.oom_kills, 0);  // a count: below 0 means none
  r.Time("started_at", &e.started_at);
  r.Time("finished_at", &e.finished_at);
  r.Int("output_bytes", &e.output_bytes);
  r.Bool("output_truncated", &e.output_truncated);
  r.Bool("output_omitted", &e.output_omitted);
  if (r.Has("output")) {
    std::vector<OutputChunk> output;
    r.ObjectArray("output", [&](AnswerReader& item) {
      OutputChunk c;
      ReadChunk(item, c);
      output.push_back(std::move(c));
    });
    e.output = std::move(output);
  }
}

}  // namespace

nlohmann::json ToJson(const ExecCreate& c) {
  const ExecCreate defaults;
  nlohmann::json j = nlohmann::json::object();
  if (!c.argv.empty()) {
    j["argv"] = c.argv;
  } else {
    j["shell"] = c.shell;
  }
  if (!c.env.empty()) {
    j["env"] = c.env;
  }
  if (!c.cwd.empty()) {
    j["cwd"] = c.cwd;
  }
  if (c.user != defaults.user) {
    j["user"] = c.user;
  }
  if (c.timeout_ms != 0) {
    j["timeout_ms"] = c.timeout_ms;
  }
  j["stdin"] = c.stdin_open;
  if (c.pty) {
    j["pty"] = PtySizeToJson(c.pty->first, c.pty->second);
  }
  j["kill_on_disconnect"] = c.kill_on_disconnect;
  if (c.sync != defaults.sync) {
    j["sync"] = c.sync;
  }
  if (c.kill_leftovers) {
    j["kill_leftovers"] = true;
  }
  return j;
}

absl::StatusOr<ExecCreate> DecodeExecCreate(absl::string_view body) {
  ExecCreate c;
  ABOX_ASSIGN_OR_RETURN(nlohmann::json object,
                        ParseObject(std::string_view(body.data(), body.size())));
  Reader r(object);
  r.OptionalStringArray("argv", &c.argv, 4096);
  r.OptionalString("shell", &c.shell);
  r.OptionalStringMap("env", &c.env, 4096);
  r.OptionalString("cwd", &c.cwd, 4096);
  r.OptionalString("user", &c.user, 32);
  r.OptionalInt("timeout_ms", &c.timeout_ms, 0, int64_t{365} * 86400 * 1000);
  r.OptionalBool("stdin", &c.stdin_open);
  r.OptionalObject("pty", [&](Reader& p) {
    int64_t rows = 0;
    int64_t cols = 0;
    p.RequiredInt("rows", &rows, 1, 10000);
    p.RequiredInt("cols", &cols, 1, 10000);
    c.pty = std::make_pair(rows, cols);
  });
  r.OptionalBool("kill_on_disconnect", &c.kill_on_disconnect);
  r.OptionalBool("sync", &c.sync);
  r.OptionalBool("kill_leftovers", &c.kill_leftovers);
  ABOX_RETURN_IF_ERROR(r.Finish());
  if (c.argv.empty() == c.shell.empty()) {
    return FieldError(c.argv.empty() ? "argv" : "shell",
                      c.argv.empty() ? "give the command as argv (a list) or shell (a string)"
                                     : "give either argv or shell, not both");
  }
  if (c.user.empty()) {
    c.user = "agent";
  }
  if (c.user != "agent" && c.user != "root") {
    return FieldError("user", absl::StrCat("user must be \"agent\" or \"root\", not \"",
                                           absl::CHexEscape(c.user), "\""));
  }
  for (const auto& [key, value] : c.env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return FieldError(absl::StrCat("env.", key),
                        "environment variable names are non-empty and have no '='");
    }
  }
  return c;
}

nlohmann::json PtySizeToJson(int64_t rows, int64_t cols) {
  return {{"rows", rows}, {"cols", cols}};
}

absl::StatusOr<std::pair<int64_t, int64_t>> DecodePtySize(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json object,
                        ParseObject(std::string_view(body.data(), body.size())));
  Reader r(object);
  int64_t rows = 0;
  int64_t cols = 0;
  r.RequiredInt("rows", &rows, 1, 10000);
  r.RequiredInt("cols", &cols, 1, 10000);
  ABOX_RETURN_IF_ERROR(r.Finish());
  return std::make_pair(rows, cols);
}

nlohmann::json SignalRequestToJson(absl::string_view signal_name) {
  return {{"signal", std::string(signal_name)}};
}

absl::StatusOr<int> ParseSignal(absl::string_view text) {
  int number = 0;
  if (absl::SimpleAtoi(text, &number)) {
    if (number >= 1 && number <= 64) {
      return number;
    }
  } else {
    std::string upper = absl::AsciiStrToUpper(text);
    absl::string_view name = upper;
    absl::ConsumePrefix(&name, "SIG");
    for (const SignalName& s : kSignals) {
      if (name == s.name) {
        return s.number;
      }
    }
  }
  return FieldError("signal", absl::StrCat("unknown signal \"", absl::CHexEscape(text),
                                           "\": use a number 1-64 or a name like TERM, INT, KILL"));
}

absl::StatusOr<int> DecodeSignalRequest(absl::string_view body) {
  ABOX_ASSIGN_OR_RETURN(nlohmann::json object,
                        ParseObject(std::string_view(body.data(), body.size())));
  const auto it = object.find("signal");
  if (it != object.end() && it->is_number_integer()) {
    Reader r(object);
    int64_t number = 0;
    r.RequiredInt("signal", &number, 1, 64);
    ABOX_RETURN_IF_ERROR(r.Finish());
    return static_cast<int>(number);
  }
  Reader r(object);
  std::string name;
  r.RequiredString("signal", &name, 32);
  ABOX_RETURN_IF_ERROR(r.Finish());
  return ParseSignal(name);
}

nlohmann::json ToJson(const OutputChunk& c) {
  nlohmann::json j = {{"seq", c.seq}, {"stream", c.stream}};
  if (base::IsValidUtf8(c.data)) {
    j["data"] = c.data;
  } else {
    j["data_b64"] = absl::Base64Escape(c.data);
  }
  return j;
}

absl::StatusOr<OutputChunk> DecodeOutputChunk(const nlohmann::json& value) {
  AnswerReader r(value);
  OutputChunk c;
  ReadChunk(r, c);
  ABOX_RETURN_IF_ERROR(r.status());
  return c;
}

nlohmann::json ToJson(const Exec& e) {
  nlohmann::json j = {
      {"id", e.id},
      {"sandbox_id", e.sandbox_id},
      {"env", e.env},
      {"cwd", e.cwd},
      {"user", e.user},
      {"pty", e.pty},
      {"timeout_ms", e.timeout_ms},
      {"state", e.state},
      {"output_bytes", e.output_bytes},
      {"output_truncated", e.output_truncated},
  };
  PutApiTime(j, "started_at", e.started_at);
  if (!e.argv.empty()) {
    j["argv"] = e.argv;
  } else {
    j["shell"] = e.shell;
  }
  if (e.state != "running") {
    if (e.exit_code) {
      j["exit_code"] = *e.exit_code;
    }
    if (e.signal) {
      j["signal"] = *e.signal;
    }
    j["timed_out"] = e.timed_out;
    if (!e.error.empty()) {
      j["error"] = e.error;
    }
    j["oom_kills"] = e.oom_kills;
  }
  PutApiTime(j, "finished_at", e.finished_at);
  if (e.output) {
    nlohmann::json output = nlohmann::json::array();
    for (const OutputChunk& c : *e.output) {
      output.push_back(ToJson(c));
    }
    j["output"] = std::move(output);
  }
  if (e.output_omitted) {
    j["output_omitted"] = true;
  }
  return j;
}

absl::StatusOr<Exec> DecodeExec(const nlohmann::json& value) {
  AnswerReader r(value);
  Exec e;
  ReadExec(r, e);
  ABOX_RETURN_IF_ERROR(r.status());
  return e;
}

int64_t SuggestedMemoryMib(int64_t memory_mib) {
  constexpr int64_t kLargest = 262144;  // SandboxCreate's bound
  return memory_mib > 0 ? std::min(memory_mib * 2, kLargest) : 4096;
}

std::string OomSentence(const Exec& exec, int64_t memory_mib, absl::string_view remedy) {
  if (exec.oom_kills <= 0) {
    return "";
  }
  std::string why = absl::StrCat(
      "(", memory_mib > 0 ? absl::StrCat("the sandbox has ", memory_mib, " MiB; ") : "", remedy,
      ")");
  if (exec.signal == SIGKILL && !exec.timed_out) {
    return absl::StrCat("the command was killed for lack of memory ", why);
  }
  return absl::StrCat("the OOM killer ended ", exec.oom_kills,
                      exec.oom_kills == 1 ? " process" : " processes", " during this command ",
                      why);
}

nlohmann::json ExecListToJson(const std::vector<Exec>& execs) {
  nlohmann::json list = nlohmann::json::array();
  for (const Exec& e : execs) {
    list.push_back(ToJson(e));
  }
  return {{"execs", std::move(list)}};
}

absl::StatusOr<std::vector<Exec>> DecodeExecList(const nlohmann::json& value) {
  AnswerReader r(value);
  if (r.status().ok() && !r.Has("execs")) {
    return WithField(absl::DataLossError("aboxd's answer has no \"execs\""), "execs");
  }
  std::vector<Exec> execs;
  r.ObjectArray("execs", [&](AnswerReader& item) {
    Exec e;
    ReadExec(item, e);
    execs.push_back(std::move(e));
  });
  ABOX_RETURN_IF_ERROR(r.status());
  return execs;
}

OutputLine OutputLine::Output(OutputChunk chunk) {
  OutputLine line;
  line.type = Type::kOutput;
  line.type_name = "output";
  line.chunk = std::move(chunk);
  return line;
}

OutputLine OutputLine::Truncated(int64_t first_kept_seq) {
  OutputLine line;
  line.type = Type::kTruncated;
  line.type_name = "truncated";
  line.chunk.seq = first_kept_seq;
  return line;
}

OutputLine OutputLine::Exit(Exec exec) {
  OutputLine line;
  line.type = Type::kExit;
  line.type_name = "exit";
  line.exec = std::move(exec);
  return line;
}

nlohmann::json ToJson(const OutputLine& line) {
  switch (line.type) {
    case OutputLine::Type::kOutput: {
      nlohmann::json j = ToJson(line.chunk);
      j["type"] = "output";
      return j;
    }
    case OutputLine::Type::kTruncated:
      return {{"type", "truncated"}, {"seq", line.chunk.seq}};
    case OutputLine::Type::kExit:
      return {{"type", "exit"}, {"exec", ToJson(line.exec)}};
    case OutputLine::Type::kOther:
      break;
  }
  return {{"type", line.type_name}};
}

absl::StatusOr<OutputLine> DecodeOutputLine(const nlohmann::json& value) {
  AnswerReader r(value);
  OutputLine line;
  r.String("type", &line.type_name);
  if (line.type_name == "output") {
    line.type = OutputLine::Type::kOutput;
    ReadChunk(r, line.chunk);
  } else if (line.type_name == "truncated") {
    line.type = OutputLine::Type::kTruncated;
    r.Int("seq", &line.chunk.seq);
  } else if (line.type_name == "exit") {
    line.type = OutputLine::Type::kExit;
    r.Object("exec", [&](AnswerReader& e) { ReadExec(e, line.exec); });
  }
  ABOX_RETURN_IF_ERROR(r.status());
  return line;
}

}  // namespace abox::api
