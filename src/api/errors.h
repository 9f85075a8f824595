// How an absl::Status becomes an HTTP error: the one table of status codes, HTTP statuses and
// stable error codes, and the JSON error body every API error uses.
//
//   {"error": {"code": "not_found", "message": "no sandbox \"abc\"", "field": "id"}}
//
// `code` is stable API (clients switch on it); `message` is for people and says what to do
// next; `field` names the offending request field when there is one.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace abox::api {

// A stable error code and the HTTP status it is sent with.
struct ErrorKind {
  int http_status;
  absl::string_view code;
};

// Error codes that are not the default for their absl::StatusCode (see errors.cc for the
// table). Attach one with WithErrorCode(); ErrorKindOf() honours it.
inline constexpr absl::string_view kPayloadTooLarge = "payload_too_large";         // 413
inline constexpr absl::string_view kMethodNotAllowed = "method_not_allowed";       // 405
inline constexpr absl::string_view kRequestTimeout = "request_timeout";            // 408
inline constexpr absl::string_view kTooManyConnections = "too_many_connections";   // 503
inline constexpr absl::string_view kInsufficientStorage = "insufficient_storage";  // 507

// The HTTP status and stable code for `status`: the code attached with WithErrorCode() when it
// is in the table, else the default row for status.code(). An OK status is a caller bug and
// maps to 500 "internal".
[[nodiscard]] ErrorKind ErrorKindOf(const absl::Status& status);

// Returns `status` carrying the stable error `code` (which must be in the table; unknown codes
// are ignored by ErrorKindOf).
[[nodiscard]] absl::Status WithErrorCode(absl::Status status, absl::string_view code);

// Returns `status` naming the request field it is about (e.g. "cpus", "argv[2]", "labels.app").
[[nodiscard]] absl::Status WithField(absl::Status status, absl::string_view field);
// The field attached with WithField(), if any.
[[nodiscard]] std::optional<std::string> FieldOf(const absl::Status& status);

// kInvalidArgument about `field`: the 400 "bad_request" every decoder uses.
[[nodiscard]] absl::Status FieldError(absl::string_view field, absl::string_view message);
// kResourceExhausted with code "payload_too_large" (413).
[[nodiscard]] absl::Status PayloadTooLargeError(absl::string_view message);

// The JSON error body: {"error":{"code":..., "message":..., "field":...?}} (compact, no newline).
[[nodiscard]] std::string ErrorBody(absl::string_view code, absl::string_view message,
                                    std::optional<absl::string_view> field = std::nullopt);

// The fields of an error body as a client reads them. Best effort: a field that is absent or
// not a string is empty (whatever the body holds, the HTTP status already says it failed).
struct ErrorFields {
  std::string code;
  std::string message;
  std::string field;
};
[[nodiscard]] ErrorFields ReadErrorBody(absl::string_view body);

// An error response ready to send.
struct ErrorResponse {
  int http_status;
  std::string body;  // ErrorBody(...)
};
// The status line and body for `status` (message = status.message()).
[[nodiscard]] ErrorResponse ErrorResponseFor(const absl::Status& status);

}  // namespace abox::api
