#include "src/runtime/agent_guest_tools.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "src/base/status_macros.h"

namespace abox::runtime {
namespace {

// The tools print one line on failure; more than this is cut.
constexpr size_t kMaxStderr = 16 << 10;

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

  absl::Status input_status;
  if (input) {
    input_status = input([&](absl::string_view data) { return exec->WriteStdin(data); });
    exec->CloseStdin();
  }
  std::string err;
  absl::Status output_status;
  while (std::optional<Exec::Chunk> chunk = exec->ReadOutput()) {
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
  ABOX_ASSIGN_OR_RETURN(proto::ExitInfo exit, exec->Wait());
  std::string what = absl::StrCat("abox-guest ws ", args.empty() ? "" : args[0]);
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
