#include "src/api/resource_json.h"

#include <csignal>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/api/errors.h"
#include "src/api/json_body.h"
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

void PutTime(nlohmann::json& j, const char* key, const std::optional<absl::Time>& t) {
  if (t) {
    j[key] = FormatApiTime(*t);
  }
}

}  // namespace

std::string FormatApiTime(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

absl::Status ValidateSandboxName(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return FieldError("name",
                      absl::StrCat("invalid sandbox name \"", absl::CHexEscape(name), "\": ", why));
  };
  if (name.empty() || name.size() > 63) {
    return bad("use 1-63 characters");
  }
  if (!absl::ascii_isalnum(static_cast<unsigned char>(name[0]))) {
    return bad("start it with a letter or digit");
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return bad("use only letters, digits, '_', '.' and '-'");
    }
  }
  if (name.size() == 12 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      })) {
    return bad("12 hex characters look like a sandbox id; pick another name");
  }
  return absl::OkStatus();
}

absl::StatusOr<SandboxCreate> DecodeSandboxCreate(absl::string_view body) {
  SandboxCreate c;
  nlohmann::json object = nlohmann::json::object();
  if (!absl::StripAsciiWhitespace(body).empty()) {
    ABOX_ASSIGN_OR_RETURN(object, ParseObject(std::string_view(body.data(), body.size())));
  }
  Reader r(object);
  r.OptionalString("image", &c.image, 64);
  r.OptionalString("name", &c.name, 256);
  r.OptionalInt("cpus", &c.cpus, 1, 64);
  r.OptionalInt("memory_mib", &c.memory_mib, 128, 262144);
  r.OptionalStringMap("labels", &c.labels, 64);
  r.OptionalInt("ttl_seconds", &c.ttl_seconds, 0, int64_t{10} * 365 * 86400);
  r.OptionalInt("idle_timeout_seconds", &c.idle_timeout_seconds, 0, int64_t{10} * 365 * 86400);
  r.OptionalString("accel", &c.accel, 16);
  r.OptionalObject("workspace", [&](Reader& w) {
    WorkspaceSpec spec;
    w.RequiredString("path", &spec.path, 4096);
    w.OptionalString("guest_path", &spec.guest_path, 4096);
    w.OptionalStringArray("exclude", &spec.exclude, 256);
    w.OptionalStringArray("include", &spec.include, 256);
    w.OptionalBool("git_history", &spec.git_history);
    c.workspace = std::move(spec);
  });
  r.OptionalObject("egress", [&](Reader& e) {
    EgressSpec spec;
    e.OptionalString("mode", &spec.mode, 16);
    e.OptionalStringArray("allow", &spec.allow, 1024);
    c.egress = std::move(spec);
  });
  r.OptionalObject("setup", [&](Reader& s) {
    SetupSpec spec;
    s.RequiredStringArray("commands", &spec.commands, 1, 64);
    s.OptionalStringArray("allow", &spec.allow, 1024);
    s.OptionalInt("timeout_seconds", &spec.timeout_seconds, 0, int64_t{7} * 86400);
    c.setup = std::move(spec);
  });
  ABOX_RETURN_IF_ERROR(r.Finish());
  if (c.egress && c.egress->mode && *c.egress->mode != "none" && *c.egress->mode != "allowlist" &&
      *c.egress->mode != "open") {
    return FieldError("egress.mode", absl::StrCat("egress mode must be none, allowlist or open, "
                                                  "not \"",
                                                  absl::CHexEscape(*c.egress->mode), "\""));
  }
  if (c.setup) {
    for (size_t i = 0; i < c.setup->commands.size(); ++i) {
      if (absl::StripAsciiWhitespace(c.setup->commands[i]).empty()) {
        return FieldError(absl::StrCat("setup.commands[", i, "]"), "a setup command is empty");
      }
    }
  }
  if (!c.name.empty()) {
    ABOX_RETURN_IF_ERROR(ValidateSandboxName(c.name));
  }
  if (c.accel != "auto" && c.accel != "kvm" && c.accel != "tcg") {
    return FieldError("accel", absl::StrCat("accel must be auto, kvm or tcg, not \"",
                                            absl::CHexEscape(c.accel), "\""));
  }
  for (const auto& [key, value] : c.labels) {
    if (key.empty() || key.size() > 128 || key.find('=') != std::string::npos ||
        value.size() > 1024) {
      return FieldError(absl::StrCat("labels.", key),
                        "label keys are 1-128 characters without '=', values at most 1024");
    }
  }
  return c;
}

nlohmann::json SandboxToJson(const store::SandboxRecord& s, const SandboxLive& live) {
  nlohmann::json j = {
      {"id", s.id},
      {"name", s.name},
      {"image", s.image},
      {"cpus", s.cpus},
      {"memory_mib", s.memory_mib},
      {"labels", s.labels},
      {"state", store::SandboxStateName(s.state)},
      {"created_at", FormatApiTime(s.created_at)},
      {"ttl_seconds", s.ttl_seconds},
      {"idle_timeout_seconds", s.idle_timeout_seconds},
      {"running_execs", live.running_execs},
  };
  if (!s.failure.empty()) {
    j["failure"] = s.failure;
  }
  if (!live.workspace.is_null()) {
    j["workspace"] = live.workspace;
  }
  if (!live.egress_mode.empty()) {
    j["egress"] = {{"mode", live.egress_mode}};
  }
  PutTime(j, "ready_at", s.ready_at);
  PutTime(j, "last_active_at", s.last_active_at);
  if (!s.accel.empty()) {
    j["accel"] = s.accel;
  }
  if (s.vmm_pid != 0) {
    j["vmm_pid"] = s.vmm_pid;
  }
  bool live_state =
      s.state == store::SandboxState::kCreating || s.state == store::SandboxState::kReady;
  if (live_state) {
    std::optional<absl::Time> expires;
    if (s.ttl_seconds > 0) {
      expires = s.created_at + absl::Seconds(s.ttl_seconds);
    }
    if (s.idle_timeout_seconds > 0 && s.last_active_at && live.running_execs == 0) {
      absl::Time idle = *s.last_active_at + absl::Seconds(s.idle_timeout_seconds);
      expires = expires ? std::min(*expires, idle) : idle;
    }
    PutTime(j, "expires_at", expires);
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

nlohmann::json ExecToJson(const store::ExecRecord& e) {
  nlohmann::json j = {
      {"id", e.id},
      {"sandbox_id", e.sandbox_id},
      {"env", e.env},
      {"cwd", e.cwd},
      {"user", e.user.empty() ? "agent" : e.user},
      {"pty", e.pty},
      {"timeout_ms", e.timeout_ms},
      {"state", store::ExecStateName(e.state)},
      {"started_at", FormatApiTime(e.started_at)},
      {"output_bytes", e.output_bytes},
      {"output_truncated", e.output_truncated},
  };
  if (!e.argv.empty()) {
    j["argv"] = e.argv;
  } else {
    j["shell"] = e.shell;
  }
  if (e.state != store::ExecState::kRunning) {
    if (e.result.exit_code) {
      j["exit_code"] = *e.result.exit_code;
    }
    if (e.result.signal) {
      j["signal"] = *e.result.signal;
    }
    j["timed_out"] = e.result.timed_out;
    if (!e.result.error.empty()) {
      j["error"] = e.result.error;
    }
  }
  PutTime(j, "finished_at", e.finished_at);
  return j;
}

nlohmann::json ExecToJson(const store::ExecWithOutput& e) {
  nlohmann::json j = ExecToJson(e.exec);
  nlohmann::json output = nlohmann::json::array();
  for (const store::OutputChunk& c : e.output) {
    output.push_back(OutputChunkToJson(c.seq, c.stream, c.data));
  }
  j["output"] = std::move(output);
  return j;
}

nlohmann::json OutputChunkToJson(int64_t seq, store::ExecStream stream, absl::string_view data) {
  nlohmann::json j = {{"seq", seq}, {"stream", store::ExecStreamName(stream)}};
  if (base::IsValidUtf8(data)) {
    j["data"] = std::string(data);
  } else {
    j["data_b64"] = absl::Base64Escape(data);
  }
  return j;
}

nlohmann::json OutputEventJson(int64_t seq, store::ExecStream stream, absl::string_view data) {
  nlohmann::json j = OutputChunkToJson(seq, stream, data);
  j["type"] = "output";
  return j;
}

nlohmann::json EventToJson(const store::Event& e) {
  nlohmann::json j = {
      {"seq", e.seq}, {"time", FormatApiTime(e.time)}, {"type", e.type}, {"payload", e.payload}};
  if (!e.sandbox_id.empty()) {
    j["sandbox_id"] = e.sandbox_id;
  }
  return j;
}

std::string Dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace abox::api
