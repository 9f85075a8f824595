// The client's side of the API's error table (src/api/errors.h): an HTTP error response becomes an
// absl::Status with the server's message verbatim (it already says what to do next).
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace abox::client {

// The absl code for an HTTP status when the body carries no known error code:
// 400 kInvalidArgument, 401 kUnauthenticated, 403 kPermissionDenied, 404 kNotFound,
// 405 kUnimplemented, 408 kDeadlineExceeded, 409 kFailedPrecondition, 413 and 429
// kResourceExhausted, 499 kCancelled, 500 kInternal, 501 kUnimplemented, 502 and 503
// kUnavailable, 504 kDeadlineExceeded; other 4xx kFailedPrecondition, anything else kUnknown.
[[nodiscard]] absl::StatusCode StatusCodeForHttp(int http_status);

// The status for an error response with `body`. The body's stable `code` decides the absl code
// (falling back to the HTTP status for codes this client does not know); `message` is kept
// verbatim; the code and `field` are attached, so api::ErrorKindOf() and api::FieldOf() read
// them back. A body that is not the API's JSON error gives a message quoting its start.
[[nodiscard]] absl::Status StatusFromHttpError(int http_status, absl::string_view body);

}  // namespace abox::client
