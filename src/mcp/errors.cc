#include "src/mcp/errors.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "src/mcp/json_rpc.h"

namespace abox::mcp {
namespace {

using C = absl::StatusCode;

// The one table. aboxd's messages already say what failed and often what to do (the image to
// build, the budget's numbers); the next step adds what a model can do about it with these tools.
constexpr std::array<McpErrorKind, 16> kTable = {{
    {C::kInvalidArgument, kInvalidParams, "invalid_argument",
     "Fix the argument named above and call the tool again (tools/list has the schema)."},
    {C::kNotFound, kInvalidParams, "not_found",
     "Call sandbox_list to see the sandboxes (ids, names, states); a missing image is built "
     "by the person with `abox image build`."},
    {C::kAlreadyExists, kInvalidParams, "already_exists",
     "Choose another name, or use the existing one (sandbox_list)."},
    {C::kFailedPrecondition, kInvalidParams, "conflict",
     "The sandbox or command is not in a state that allows this (see sandbox_inspect); a "
     "stopped sandbox cannot run commands: create a new one."},
    {C::kResourceExhausted, kInternalError, "no_capacity",
     "The host's budget is full (numbers above): stop or remove a sandbox you created, or ask "
     "for fewer cpus / memory_mib."},
    {C::kPermissionDenied, kInvalidParams, "not_allowed",
     "This needs the person: give them the command above."},
    {C::kUnauthenticated, kInvalidParams, "not_allowed",
     "This needs the person: give them the command above."},
    {C::kDeadlineExceeded, kInternalError, "timeout",
     "Run long work in the background (exec_start, then exec_read / exec_wait)."},
    {C::kUnavailable, kInternalError, "unavailable",
     "aboxd could not be reached or is busy; retry shortly. If it keeps failing the person can "
     "run `abox daemon status`."},
    {C::kCancelled, kInternalError, "cancelled", "The call was cancelled."},
    {C::kAborted, kInternalError, "aborted", "Retry the call."},
    {C::kOutOfRange, kInvalidParams, "out_of_range", "Use a value inside the range above."},
    {C::kUnimplemented, kMethodNotFound, "unsupported",
     "This abox does not support it; tools/list shows what does."},
    {C::kInternal, kInternalError, "internal", "An abox bug: report it with the message above."},
    {C::kDataLoss, kInternalError, "internal", "An abox bug: report it with the message above."},
    {C::kUnknown, kInternalError, "error", "Check the message above."},
}};

}  // namespace

const McpErrorKind& McpErrorKindOf(const absl::Status& status) {
  C code = status.ok() ? C::kInternal : status.code();
  for (const McpErrorKind& row : kTable) {
    if (row.code == code) {
      return row;
    }
  }
  return kTable.back();
}

std::string ToolErrorText(const absl::Status& status) {
  const McpErrorKind& kind = McpErrorKindOf(status);
  return absl::StrCat(kind.label, ": ", status.message(), "\nNext: ", kind.next_step);
}

nlohmann::json ToolErrorResult(const absl::Status& status) {
  return {{"content", nlohmann::json::array({{{"type", "text"}, {"text", ToolErrorText(status)}}})},
          {"isError", true}};
}

nlohmann::json ErrorAnswer(const nlohmann::json& id, const absl::Status& status) {
  return ErrorMessage(id, McpErrorKindOf(status).json_rpc_code, status.message());
}

}  // namespace abox::mcp
