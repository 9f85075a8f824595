// How an absl::Status becomes an MCP error: the one table of status codes, their JSON-RPC error
// codes (for protocol errors: unknown method, unknown tool, malformed params) and the label and
// next step of a tool result with isError (for everything a tool runs into: bad argument values,
// aboxd's refusals, a daemon that cannot be reached).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace abox::mcp {

struct McpErrorKind {
  absl::StatusCode code;
  int json_rpc_code;            // when the status ends a request as a JSON-RPC error
  absl::string_view label;      // first word of an isError result's text
  absl::string_view next_step;  // what a model can do next, added after the message
};

// The row for `status` (the kUnknown row for codes the table lacks; OK is a caller bug and gets
// the kInternal row).
[[nodiscard]] const McpErrorKind& McpErrorKindOf(const absl::Status& status);

// The text of an isError result: "<label>: <message>\nNext: <next step>".
[[nodiscard]] std::string ToolErrorText(const absl::Status& status);

// A tools/call result with isError true and that text.
[[nodiscard]] nlohmann::json ToolErrorResult(const absl::Status& status);

// The JSON-RPC error answer to request `id` that ends with `status` (a protocol error: unknown
// method, unknown tool, malformed params): the row's code, the status's message.
[[nodiscard]] nlohmann::json ErrorAnswer(const nlohmann::json& id, const absl::Status& status);

}  // namespace abox::mcp
