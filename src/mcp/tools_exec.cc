// exec (a command to its end, bounded), and background commands: exec_start, exec_read,
// exec_write_stdin, exec_signal, exec_wait.
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/api/exec.h"
#include "src/api/sandbox.h"
#include "src/client/answers.h"
#include "src/client/api_paths.h"
#include "src/mcp/text.h"
#include "src/mcp/tool_args.h"
#include "src/mcp/tools.h"

namespace abox::mcp {
namespace {

constexpr size_t kOutputCap = 20000;  // bytes of each stream an exec result carries
constexpr int64_t kDefaultTimeout = 45;
constexpr int64_t kMaxTimeout = 50;  // clients give up at 60 s

nlohmann::json CommandProps(bool background) {
  nlohmann::json props = {
      {"sandbox", SandboxProp()},
      {"argv", StringListProp("The command and its arguments, run without a shell, e.g. "
                              "[\"npm\", \"test\"]. Give argv or shell.")},
      {"shell", Prop("string",
                     "A command line run with `sh -c`, e.g. \"make -j4 && ./a.out\". "
                     "Give argv or shell.")},
      {"cwd", Prop("string", "Working directory in the guest (default: the workspace).")},
      {"env",
       {{"type", "object"},
        {"additionalProperties", {{"type", "string"}}},
        {"description", "Environment variables to add."}}},
      {"stdin", Prop("string", "Text written to the command's standard input.")},
      {"root", Prop("boolean", "Run as root instead of the unprivileged user `agent`.")},
      {"sync", Prop("boolean", "Copy the host workspace's changes in first (default true).")},
  };
  if (background) {
    props["timeout_seconds"] = IntProp("Kill it after this long (default 0: never).", 0, 86400);
    props["keep_stdin_open"] =
        Prop("boolean", "Keep stdin open for exec_write_stdin (default: closed after `stdin`).");
  } else {
    props["timeout_seconds"] =
        IntProp("Kill it after this long (default 45, at most 50; use exec_start for longer work).",
                1, kMaxTimeout);
  }
  return props;
}

absl::StatusOr<api::ExecCreate> CommandFromArgs(const nlohmann::json& args) {
  api::ExecCreate create;
  create.argv = StringListArg(args, "argv");
  create.shell = StringArg(args, "shell");
  if (create.argv.empty() == create.shell.empty()) {
    return absl::InvalidArgumentError(
        "give exactly one of \"argv\" (a non-empty array) and \"shell\" (a command line)");
  }
  create.env = StringMapArg(args, "env");
  create.cwd = StringArg(args, "cwd");
  create.sync = BoolArg(args, "sync", true);
  if (BoolArg(args, "root", false)) {
    create.user = "root";
  }
  return create;
}

nlohmann::json StateJson(const ExecState& s) {
  nlohmann::json out = {{"state", s.state},
                        {"ended", s.ended},
                        {"exit_code", s.exit_code ? nlohmann::json(*s.exit_code) : nullptr},
                        {"signal", s.signal ? nlohmann::json(*s.signal) : nullptr},
                        {"timed_out", s.timed_out},
                        {"oom_kills", s.oom_kills},
                        {"stdout_bytes", s.stdout_bytes},
                        {"stderr_bytes", s.stderr_bytes},
                        {"duration_ms", s.duration_ms}};
  if (!s.error.empty()) {
    out["error"] = s.error;
  }
  return out;
}

// When the guest's OOM killer struck during the command: "oom", the sentence the CLI prints, with
// the sandbox's memory (looked up only then; without it when that fails).
void AddOomNote(ToolEnv& env, CallContext& ctx, const std::string& sandbox, const ExecState& s,
                nlohmann::json& out) {
  if (s.oom_kills <= 0) {
    return;
  }
  int64_t memory_mib = 0;
  absl::StatusOr<client::ApiResponse> r = ApiGet(env, ctx, client::SandboxPath(sandbox));
  if (r.ok()) {
    absl::StatusOr<api::Sandbox> got =
        client::DecodeAnswer(*r, "GET /v1/sandboxes/{id}", api::DecodeSandbox);
    memory_mib = got.ok() ? got->memory_mib : 0;
  }
  out["oom"] = OomNote(s, memory_mib);
}

nlohmann::json StateSchema(nlohmann::json extra, std::vector<std::string> required) {
  nlohmann::json props = {
      {"state", {{"type", "string"}}},
      {"ended", {{"type", "boolean"}}},
      {"exit_code", {{"type", {"integer", "null"}}}},
      {"signal", {{"type", {"integer", "null"}}}},
      {"timed_out", {{"type", "boolean"}}},
      {"oom_kills", {{"type", "integer"}}},
      {"oom", {{"type", "string"}}},
      {"stdout_bytes", {{"type", "integer"}}},
      {"stderr_bytes", {{"type", "integer"}}},
      {"duration_ms", {{"type", "integer"}}},
      {"error", {{"type", "string"}}},
  };
  props.update(extra);
  required.insert(required.end(), {"state", "ended", "exit_code", "timed_out"});
  return {{"type", "object"}, {"properties", props}, {"required", required}};
}

absl::StatusOr<nlohmann::json> Exec(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  absl::StatusOr<api::ExecCreate> create = CommandFromArgs(args);
  if (!create.ok()) {
    return create.status();
  }
  absl::StatusOr<Captured> run = RunCaptured(
      env, ctx, StringArg(args, "sandbox"), *std::move(create), StringArg(args, "stdin"),
      absl::Seconds(IntArg(args, "timeout_seconds", kDefaultTimeout)), "exec");
  if (!run.ok()) {
    return run.status();
  }
  nlohmann::json out = StateJson(run->state);
  AddOomNote(env, ctx, run->sandbox_id, run->state, out);
  std::string out_tail = TailUtf8(run->stdout_text, kOutputCap);
  std::string err_tail = TailUtf8(run->stderr_text, kOutputCap);
  out["stdout_truncated"] = static_cast<int64_t>(out_tail.size()) < run->state.stdout_bytes;
  out["stderr_truncated"] = static_cast<int64_t>(err_tail.size()) < run->state.stderr_bytes;
  out["stdout"] = std::move(out_tail);
  out["stderr"] = std::move(err_tail);
  return out;
}

absl::StatusOr<nlohmann::json> Start(ToolEnv& env, const nlohmann::json& args) {
  absl::StatusOr<api::ExecCreate> create = CommandFromArgs(args);
  if (!create.ok()) {
    return create.status();
  }
  bool keep_open = BoolArg(args, "keep_stdin_open", false);
  std::string input = StringArg(args, "stdin");
  create->stdin_open = keep_open || !input.empty();
  create->timeout_ms = IntArg(args, "timeout_seconds", 0) * 1000;
  absl::StatusOr<std::shared_ptr<ExecSession>> session =
      env.sessions().Start(StringArg(args, "sandbox"), *std::move(create), input, !keep_open);
  if (!session.ok()) {
    return session.status();
  }
  return nlohmann::json{{"handle", (*session)->id()},
                        {"sandbox", (*session)->sandbox_id()},
                        {"state", "running"},
                        {"cursor", 0}};
}

absl::StatusOr<nlohmann::json> Read(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  absl::StatusOr<std::shared_ptr<ExecSession>> session =
      env.sessions().Find(StringArg(args, "handle"));
  if (!session.ok()) {
    return session.status();
  }
  ExecSession& s = **session;
  int64_t cursor = IntArg(args, "cursor", 0);
  int64_t wait = IntArg(args, "wait_seconds", 0);
  if (wait > 0) {
    CallContext::CancelHook hook(ctx, [&s] { s.Interrupt(); });
    s.WaitForOutput(cursor, absl::Seconds(wait));
  }
  ExecState state = s.State();  // before the read, so `ended` implies all output was read
  ExecRead read = s.Read(cursor, static_cast<size_t>(IntArg(args, "max_bytes", kOutputCap)));
  nlohmann::json out = StateJson(state);
  AddOomNote(env, ctx, s.sandbox_id(), state, out);
  out["stdout"] = read.stdout_text;
  out["stderr"] = read.stderr_text;
  out["next_cursor"] = read.next_cursor;
  out["more"] = read.more;
  out["dropped_bytes"] = read.dropped_bytes;
  return out;
}

absl::StatusOr<nlohmann::json> Wait(ToolEnv& env, const nlohmann::json& args, CallContext& ctx) {
  absl::StatusOr<std::shared_ptr<ExecSession>> session =
      env.sessions().Find(StringArg(args, "handle"));
  if (!session.ok()) {
    return session.status();
  }
  ExecSession& s = **session;
  CallContext::CancelHook hook(ctx, [&s] { s.Interrupt(); });
  absl::Time start = absl::Now();
  absl::Time deadline = start + absl::Seconds(IntArg(args, "timeout_seconds", 30));
  while (!ctx.cancelled() && absl::Now() < deadline &&
         !s.WaitFor(std::min(absl::Seconds(1), deadline - absl::Now()))) {
    ctx.Progress(absl::ToDoubleSeconds(absl::Now() - start), "waiting for the command");
  }
  ExecState state = s.State();
  nlohmann::json out = StateJson(state);
  AddOomNote(env, ctx, s.sandbox_id(), state, out);
  return out;
}

absl::StatusOr<nlohmann::json> WriteStdin(ToolEnv& env, const nlohmann::json& args) {
  absl::StatusOr<std::shared_ptr<ExecSession>> session =
      env.sessions().Find(StringArg(args, "handle"));
  if (!session.ok()) {
    return session.status();
  }
  std::string data = StringArg(args, "data");
  bool eof = BoolArg(args, "eof", false);
  absl::Status s = env.sessions().WriteStdin(**session, data, eof);
  if (!s.ok()) {
    return s;
  }
  return nlohmann::json{{"written_bytes", data.size()}, {"closed", eof}};
}

absl::StatusOr<nlohmann::json> Signal(ToolEnv& env, const nlohmann::json& args) {
  absl::StatusOr<std::shared_ptr<ExecSession>> session =
      env.sessions().Find(StringArg(args, "handle"));
  if (!session.ok()) {
    return session.status();
  }
  std::string signal = StringArg(args, "signal", "TERM");
  absl::Status s = env.sessions().Signal(**session, signal);
  if (!s.ok()) {
    return s;
  }
  return nlohmann::json{{"signalled", signal}, {"ended", (*session)->State().ended}};
}

nlohmann::json HandleProp() { return Prop("string", "The handle exec_start returned."); }

}  // namespace

std::string OomNote(const ExecState& state, int64_t memory_mib) {
  api::Exec ended;
  ended.signal = state.signal;
  ended.timed_out = state.timed_out;
  ended.oom_kills = state.oom_kills;
  return api::OomSentence(ended, memory_mib,
                          absl::StrCat("give a sandbox more with sandbox_create's memory_mib, "
                                       "e.g. ",
                                       api::SuggestedMemoryMib(memory_mib)));
}

std::vector<Tool> ExecTools(ToolEnv& env) {
  std::vector<Tool> tools;
  nlohmann::json exec_out = StateSchema({{"stdout", {{"type", "string"}}},
                                         {"stderr", {{"type", "string"}}},
                                         {"stdout_truncated", {{"type", "boolean"}}},
                                         {"stderr_truncated", {{"type", "boolean"}}}},
                                        {"stdout", "stderr"});
  tools.push_back(Tool{
      "exec", "Run a command",
      "Runs a command in a sandbox and waits for it (at most timeout_seconds, default 45). "
      "Returns exit_code, stdout and stderr (the last 20,000 bytes of each; *_truncated and "
      "*_bytes say when there was more), duration_ms and timed_out; oom_kills counts the processes "
      "the sandbox's OOM killer ended meanwhile, and `oom` then says what happened and how to "
      "give the sandbox more memory. A non-zero exit_code is a normal result. Commands run as user "
      "`agent` in the workspace. For anything that may take "
      "longer than ~40 s (builds, test suites, servers) use exec_start.",
      ObjectSchema(CommandProps(false), {"sandbox"}), exec_out,
      Annotations(false, true, false, true),
      [&env](const nlohmann::json& a, CallContext& c) { return Exec(env, a, c); }});
  tools.push_back(Tool{
      "exec_start",
      "Start a background command",
      "Starts a command in a sandbox and returns at once with a handle. Follow it with "
      "exec_read (output since a cursor), exec_wait, exec_write_stdin and exec_signal. It runs "
      "until it ends, its timeout_seconds pass, or this MCP server exits.",
      ObjectSchema(CommandProps(true), {"sandbox"}),
      {{"type", "object"},
       {"properties",
        {{"handle", {{"type", "string"}}},
         {"sandbox", {{"type", "string"}}},
         {"state", {{"type", "string"}}},
         {"cursor", {{"type", "integer"}}}}},
       {"required", {"handle", "sandbox"}}},
      Annotations(false, true, false, true),
      [&env](const nlohmann::json& a, CallContext&) { return Start(env, a); }});
  tools.push_back(Tool{
      "exec_read", "Read a background command's output",
      "Returns the output produced after `cursor` (start with 0, then pass next_cursor), and "
      "whether the command ended with its exit_code. With wait_seconds it waits up to that "
      "long for new output first. When `ended` is true and `more` false, everything was read.",
      ObjectSchema({{"handle", HandleProp()},
                    {"cursor", IntProp("Byte offset into the combined output (default 0).", 0,
                                       int64_t{1} << 50)},
                    {"max_bytes", IntProp("At most this much output (default 20000).", 1, 100000)},
                    {"wait_seconds", IntProp("Wait this long for new output (default 0).", 0, 30)}},
                   {"handle"}),
      StateSchema({{"stdout", {{"type", "string"}}},
                   {"stderr", {{"type", "string"}}},
                   {"next_cursor", {{"type", "integer"}}},
                   {"more", {{"type", "boolean"}}},
                   {"dropped_bytes", {{"type", "integer"}}}},
                  {"stdout", "stderr", "next_cursor", "more"}),
      Annotations(true, false, false, false),
      [&env](const nlohmann::json& a, CallContext& c) { return Read(env, a, c); }});
  tools.push_back(
      Tool{"exec_write_stdin",
           "Write to a background command's stdin",
           "Writes text to the standard input of a command started with keep_stdin_open; eof: true "
           "closes it afterwards.",
           ObjectSchema({{"handle", HandleProp()},
                         {"data", Prop("string", "Text to write (may be empty with eof).")},
                         {"eof", Prop("boolean", "Close stdin after the data.")}},
                        {"handle"}),
           {{"type", "object"},
            {"properties",
             {{"written_bytes", {{"type", "integer"}}}, {"closed", {{"type", "boolean"}}}}},
            {"required", {"written_bytes", "closed"}}},
           Annotations(false, false, false, false),
           [&env](const nlohmann::json& a, CallContext&) { return WriteStdin(env, a); }});
  tools.push_back(
      Tool{"exec_signal",
           "Signal a background command",
           "Sends a signal to a background command: TERM (default) asks it to stop, INT is Ctrl-C, "
           "KILL ends it at once.",
           ObjectSchema({{"handle", HandleProp()},
                         {"signal",
                          {{"type", "string"},
                           {"enum", {"TERM", "INT", "KILL", "HUP", "QUIT", "USR1", "USR2"}},
                           {"description", "The signal (default TERM)."}}}},
                        {"handle"}),
           {{"type", "object"},
            {"properties", {{"signalled", {{"type", "string"}}}, {"ended", {{"type", "boolean"}}}}},
            {"required", {"signalled", "ended"}}},
           Annotations(false, true, false, false),
           [&env](const nlohmann::json& a, CallContext&) { return Signal(env, a); }});
  tools.push_back(Tool{
      "exec_wait", "Wait for a background command",
      "Waits until a background command ends or timeout_seconds (default 30, at most 50) pass, "
      "and returns its state (ended, exit_code). Read its output with exec_read.",
      ObjectSchema({{"handle", HandleProp()},
                    {"timeout_seconds", IntProp("How long to wait (default 30).", 0, kMaxTimeout)}},
                   {"handle"}),
      StateSchema(nlohmann::json::object(), {}), Annotations(true, false, false, false),
      [&env](const nlohmann::json& a, CallContext& c) { return Wait(env, a, c); }});
  return tools;
}

}  // namespace abox::mcp
