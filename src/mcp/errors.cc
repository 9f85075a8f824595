#include "src/mcp/errors.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/api/errors.h"
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

// aboxd's stable error codes whose status code's row would point the model the wrong way
// (both come as kResourceExhausted, which otherwise means the cpu / memory budget).
constexpr std::array<std::pair<absl::string_view, McpErrorKind>, 2> kByApiCode = {{
    {api::kInsufficientStorage,
     {C::kResourceExhausted, kInternalError, "no_storage",
      "The host will not take in more of this sandbox's changes (numbers above): delete what "
      "should not come back (build outputs, caches, downloads) in the sandbox, or narrow the "
      "diff to the paths you need; the person can raise `aboxd --workspace-quota` or free "
      "disk."}},
    {api::kPayloadTooLarge,
     {C::kResourceExhausted, kInvalidParams, "too_large",
      "Send less in one call: split the content, or write big files from a command in the "
      "sandbox (exec)."}},
}};

}  // namespace

const McpErrorKind& McpErrorKindOf(const absl::Status& status) {
  if (!status.ok() && status.code() == C::kResourceExhausted) {
    absl::string_view api_code = api::ErrorKindOf(status).code;
    for (const auto& [name, row] : kByApiCode) {
      if (name == api_code) {
        return row;
      }
    }
  }
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
