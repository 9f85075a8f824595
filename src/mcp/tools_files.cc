// read_file, write_file, list_files: through commands in the guest (the API has no file
// routes), each a fixed script with the model's values as its arguments, never spliced into it.
#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/utf8.h"
#include "src/mcp/text.h"
#include "src/mcp/tool_args.h"
#include "src/mcp/tools.h"

namespace abox::mcp {
namespace {

constexpr absl::Duration kFileTimeout = absl::Seconds(30);
constexpr int64_t kMaxRead = 1000000;
constexpr size_t kMaxWrite = size_t{4} << 20;  // base64 text of up to 3 MiB

// Prints the file's size on a line, then its first $2 bytes.
constexpr char kReadScript[] =
    "f=\"$1\"; if [ -d \"$f\" ]; then echo \"$f is a directory: use list_files\" >&2; exit 2; "
    "fi; if [ ! -e \"$f\" ]; then echo \"$f does not exist\" >&2; exit 2; fi; "
    "wc -c < \"$f\" || exit 2; head -c \"$2\" -- \"$f\"";
constexpr char kWriteScript[] =
    "f=\"$1\"; d=$(dirname -- \"$f\"); mkdir -p -- \"$d\" && cat > \"$f\"";
// One line per entry: type (f, d, l, ...), size, path relative to $1; at most $3 + 1 lines.
// A path starting with '-' gets "./" first: find would read it as an expression (`-delete`).
constexpr char kListScript[] =
    "case \"$1\" in -*) set -- \"./$1\" \"$2\" \"$3\";; esac; "
    "if [ ! -d \"$1\" ]; then echo \"$1 is not a directory\" >&2; exit 2; fi; "
    "find \"$1\" -mindepth 1 -maxdepth \"$2\" -printf '%y\\t%s\\t%P\\n' | head -n \"$3\"";

api::ExecCreate Script(const char* script, std::vector<std::string> args) {
  api::ExecCreate create;
  create.argv = {"sh", "-c", script, "sh"};
  create.argv.insert(create.argv.end(), args.begin(), args.end());
  create.sync = false;  // files are read as the sandbox has them now
  return create;
}

absl::Status CommandFailed(absl::string_view what, const Captured& run) {
  std::string why = TailUtf8(run.stderr_text, 2000);
  if (why.empty()) {
    why = run.state.error.empty() ? absl::StrCat("exit code ", run.state.exit_code.value_or(-1))
                                  : run.state.error;
  }
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", why));
}

bool Succeeded(const Captured& run) {
  return run.state.exit_code && *run.state.exit_code == 0 && !run.state.timed_out;
}

absl::StatusOr<nlohmann::json> ReadFile(ToolEnv& env, const nlohmann::json& args,
                                        CallContext& ctx) {
  std::string path = StringArg(args, "path");
  int64_t max = IntArg(args, "max_bytes", 100000);
  absl::StatusOr<Captured> run =
      RunCaptured(env, ctx, StringArg(args, "sandbox"),
                  Script(kReadScript, {path, absl::StrCat(max)}), "", kFileTimeout, "read_file");
  if (!run.ok()) {
    return run.status();
  }
  if (!Succeeded(*run)) {
    return CommandFailed(absl::StrCat("reading ", path), *run);
  }
  size_t nl = run->stdout_raw.find('\n');
  int64_t size = 0;
  if (nl == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(run->stdout_raw).substr(0, nl), &size)) {
    return absl::InternalError("reading the file: the guest's answer has no size line");
  }
  std::string bytes = run->stdout_raw.substr(nl + 1);
  nlohmann::json out = {
      {"path", path}, {"size", size}, {"truncated", size > static_cast<int64_t>(bytes.size())}};
  if (base::IsValidUtf8(bytes)) {
    out["content"] = bytes;
    out["encoding"] = "utf-8";
  } else {
    out["content"] = absl::Base64Escape(bytes);
    out["encoding"] = "base64";
  }
  return out;
}

absl::StatusOr<nlohmann::json> WriteFile(ToolEnv& env, const nlohmann::json& args,
                                         CallContext& ctx) {
  std::string path = StringArg(args, "path");
  std::string content = StringArg(args, "content");
  if (BoolArg(args, "base64", false)) {
    std::string decoded;
    if (!absl::Base64Unescape(content, &decoded)) {
      return absl::InvalidArgumentError("argument \"content\" is not valid base64");
    }
    content = std::move(decoded);
  }
  absl::StatusOr<Captured> run =
      RunCaptured(env, ctx, StringArg(args, "sandbox"), Script(kWriteScript, {path}), content,
                  kFileTimeout, "write_file");
  if (!run.ok()) {
    return run.status();
  }
  if (!Succeeded(*run)) {
    return CommandFailed(absl::StrCat("writing ", path), *run);
  }
  return nlohmann::json{{"path", path}, {"bytes", content.size()}};
}

absl::StatusOr<nlohmann::json> ListFiles(ToolEnv& env, const nlohmann::json& args,
                                         CallContext& ctx) {
  std::string path = StringArg(args, "path", ".");
  int64_t limit = IntArg(args, "limit", 500);
  absl::StatusOr<Captured> run = RunCaptured(
      env, ctx, StringArg(args, "sandbox"),
      Script(kListScript, {path, absl::StrCat(IntArg(args, "depth", 1)), absl::StrCat(limit + 1)}),
      "", kFileTimeout, "list_files");
  if (!run.ok()) {
    return run.status();
  }
  if (!Succeeded(*run)) {
    return CommandFailed(absl::StrCat("listing ", path), *run);
  }
  nlohmann::json entries = nlohmann::json::array();
  std::vector<std::string> lines = absl::StrSplit(run->stdout_text, '\n', absl::SkipEmpty());
  bool truncated = static_cast<int64_t>(lines.size()) > limit;
  if (truncated) {
    lines.resize(static_cast<size_t>(limit));
  }
  std::sort(lines.begin(), lines.end(), [](const std::string& a, const std::string& b) {
    return a.substr(a.find('\t', a.find('\t') + 1)) < b.substr(b.find('\t', b.find('\t') + 1));
  });
  for (const std::string& line : lines) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits('\t', 2));
    if (f.size() != 3) {
      continue;
    }
    std::string type = f[0] == "f"   ? "file"
                       : f[0] == "d" ? "directory"
                       : f[0] == "l" ? "symlink"
                                     : "other";
    int64_t size = 0;
    (void)absl::SimpleAtoi(f[1], &size);
    entries.push_back({{"path", f[2]}, {"type", type}, {"size", size}});
  }
  return nlohmann::json{{"path", path}, {"entries", entries}, {"truncated", truncated}};
}

}  // namespace

std::vector<Tool> FileTools(ToolEnv& env) {
  nlohmann::json path_prop =
      Prop("string", "Path in the guest, absolute or relative to the workspace.");
  std::vector<Tool> tools;
  tools.push_back(Tool{
      "read_file",
      "Read a file in a sandbox",
      "Returns a file's content as the sandbox has it now (UTF-8 text, or base64 when binary), "
      "at most max_bytes of it (default 100,000); `truncated` says when there is more.",
      ObjectSchema(
          {{"sandbox", SandboxProp()},
           {"path", path_prop},
           {"max_bytes", IntProp("Read at most this much (default 100000).", 1, kMaxRead)}},
          {"sandbox", "path"}),
      {{"type", "object"},
       {"properties",
        {{"path", {{"type", "string"}}},
         {"size", {{"type", "integer"}}},
         {"truncated", {{"type", "boolean"}}},
         {"content", {{"type", "string"}}},
         {"encoding", {{"type", "string"}, {"enum", {"utf-8", "base64"}}}}}},
       {"required", {"path", "size", "content", "encoding"}}},
      Annotations(true, false, true, false),
      [&env](const nlohmann::json& a, CallContext& c) { return ReadFile(env, a, c); }});
  tools.push_back(Tool{
      "write_file",
      "Write a file in a sandbox",
      "Creates or replaces a file in the sandbox (parent directories are created). The host is "
      "not touched: the person applies sandbox changes to the host.",
      ObjectSchema(
          {{"sandbox", SandboxProp()},
           {"path", path_prop},
           {"content",
            {{"type", "string"}, {"maxLength", kMaxWrite}, {"description", "The new content."}}},
           {"base64", Prop("boolean", "content is base64 (for binary files).")}},
          {"sandbox", "path", "content"}),
      {{"type", "object"},
       {"properties", {{"path", {{"type", "string"}}}, {"bytes", {{"type", "integer"}}}}},
       {"required", {"path", "bytes"}}},
      Annotations(false, true, true, false),
      [&env](const nlohmann::json& a, CallContext& c) { return WriteFile(env, a, c); }});
  tools.push_back(Tool{
      "list_files",
      "List files in a sandbox",
      "Lists a directory of the sandbox (default the workspace), depth levels deep (default 1), "
      "with each entry's type and size.",
      ObjectSchema({{"sandbox", SandboxProp()},
                    {"path", Prop("string", "Directory (default: the workspace).")},
                    {"depth", IntProp("How deep to go (default 1).", 1, 10)},
                    {"limit", IntProp("At most this many entries (default 500).", 1, 5000)}},
                   {"sandbox"}),
      {{"type", "object"},
       {"properties",
        {{"path", {{"type", "string"}}},
         {"entries",
          {{"type", "array"},
           {"items",
            {{"type", "object"},
             {"properties",
              {{"path", {{"type", "string"}}},
               {"type", {{"type", "string"}}},
               {"size", {{"type", "integer"}}}}}}}}},
         {"truncated", {{"type", "boolean"}}}}},
       {"required", {"path", "entries", "truncated"}}},
      Annotations(true, false, true, false),
      [&env](const nlohmann::json& a, CallContext& c) { return ListFiles(env, a, c); }});
  return tools;
}

}  // namespace abox::mcp
