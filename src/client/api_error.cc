#include "src/client/api_error.h"

#include <array>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/api/errors.h"

namespace abox::client {
namespace {

struct CodeRow {
  absl::string_view code;
  absl::StatusCode status_code;
};

// The stable codes of docs/openapi.yaml, back to the absl code aboxd's table (src/api/errors.cc)
// produces them from. Where several absl codes share a stable code (409 "conflict" comes from
// kAlreadyExists, kFailedPrecondition and kAborted), the client picks the one callers test for.
constexpr std::array<CodeRow, 15> kCodes = {{
    {"bad_request", absl::StatusCode::kInvalidArgument},
    {"unauthenticated", absl::StatusCode::kUnauthenticated},
    {"forbidden", absl::StatusCode::kPermissionDenied},
    {"not_found", absl::StatusCode::kNotFound},
    {"method_not_allowed", absl::StatusCode::kUnimplemented},
    {"request_timeout", absl::StatusCode::kDeadlineExceeded},
    {"conflict", absl::StatusCode::kFailedPrecondition},
    {"payload_too_large", absl::StatusCode::kResourceExhausted},
    {"no_capacity", absl::StatusCode::kResourceExhausted},
    {"cancelled", absl::StatusCode::kCancelled},
    {"internal", absl::StatusCode::kInternal},
    {"not_implemented", absl::StatusCode::kUnimplemented},
    {"unavailable", absl::StatusCode::kUnavailable},
    {"too_many_connections", absl::StatusCode::kUnavailable},
    {"timeout", absl::StatusCode::kDeadlineExceeded},
}};

// The start of an unexpected body, printable, for a message.
std::string Excerpt(absl::string_view body) {
  std::string out;
  for (char c : body.substr(0, 200)) {
    out += absl::ascii_isprint(static_cast<unsigned char>(c)) ? c : ' ';
  }
  return std::string(absl::StripAsciiWhitespace(out));
}

}  // namespace

absl::StatusCode StatusCodeForHttp(int http_status) {
  switch (http_status) {
    case 400:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 405:
    case 501:
      return absl::StatusCode::kUnimplemented;
    case 408:
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    case 409:
      return absl::StatusCode::kFailedPrecondition;
    case 413:
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 499:
      return absl::StatusCode::kCancelled;
    case 500:
      return absl::StatusCode::kInternal;
    case 502:
    case 503:
      return absl::StatusCode::kUnavailable;
    default:
      return http_status >= 400 && http_status < 500 ? absl::StatusCode::kFailedPrecondition
                                                     : absl::StatusCode::kUnknown;
  }
}

absl::Status StatusFromHttpError(int http_status, absl::string_view body) {
  api::ErrorFields error = api::ReadErrorBody(body);
  const std::string& code = error.code;
  std::string message = error.message;
  if (message.empty()) {
    message = absl::StrCat("aboxd answered HTTP ", http_status, " without an error message",
                           body.empty() ? "" : ": ", Excerpt(body));
  }
  absl::StatusCode status_code = StatusCodeForHttp(http_status);
  for (const CodeRow& row : kCodes) {
    if (row.code == code) {
      status_code = row.status_code;
      break;
    }
  }
  absl::Status status(status_code, message);
  if (!code.empty()) {
    status = api::WithErrorCode(std::move(status), code);
  }
  if (!error.field.empty()) {
    status = api::WithField(std::move(status), error.field);
  }
  return status;
}

}  // namespace abox::client
