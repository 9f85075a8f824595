#include "src/api/errors.h"

#include <array>

#include "absl/strings/cord.h"
#include "nlohmann/json.hpp"

namespace abox::api {
namespace {

constexpr absl::string_view kCodePayloadUrl = "abox.dev/error-code";
constexpr absl::string_view kFieldPayloadUrl = "abox.dev/error-field";

struct Row {
  absl::StatusCode status_code;
  bool is_default;  // the row used for status_code when no explicit code is attached
  ErrorKind kind;
};

// THE table. One default row per absl::StatusCode, plus named codes attached with
// WithErrorCode(). Choices worth knowing (docs/openapi.yaml repeats them):
//  - kFailedPrecondition -> 409 "conflict", not 412: 412 is for If-Match style conditional
//    headers, which the API does not use; "sandbox is not running" is a state conflict.
//  - kResourceExhausted -> 429 "no_capacity", following google.rpc.Code's HTTP mapping: the
//    host's vCPU / memory budget is full, retry after removing sandboxes or with less.
//    (507 is WebDAV storage; 503 is kept for "the daemon itself cannot serve".) A body over the
//    limit is kResourceExhausted too, but carries "payload_too_large" -> 413.
//  - kResourceExhausted with "insufficient_storage" -> 507: a sandbox's workspace content would
//    pass its disk quota, or leave the host's disk too full (a fetch for diff / apply / pull).
//  - kCancelled -> 499 (nginx / google.rpc "client closed request"): only logged, the client
//    is gone by then.
constexpr std::array<Row, 21> kTable = {{
    {absl::StatusCode::kInvalidArgument, true, {400, "bad_request"}},
    {absl::StatusCode::kOutOfRange, true, {400, "bad_request"}},
    {absl::StatusCode::kUnauthenticated, true, {401, "unauthenticated"}},
    {absl::StatusCode::kPermissionDenied, true, {403, "forbidden"}},
    {absl::StatusCode::kNotFound, true, {404, "not_found"}},
    {absl::StatusCode::kUnimplemented, false, {405, kMethodNotAllowed}},
    {absl::StatusCode::kDeadlineExceeded, false, {408, kRequestTimeout}},
    {absl::StatusCode::kAlreadyExists, true, {409, "conflict"}},
    {absl::StatusCode::kFailedPrecondition, true, {409, "conflict"}},
    {absl::StatusCode::kAborted, true, {409, "conflict"}},
    {absl::StatusCode::kResourceExhausted, false, {413, kPayloadTooLarge}},
    {absl::StatusCode::kResourceExhausted, true, {429, "no_capacity"}},
    {absl::StatusCode::kCancelled, true, {499, "cancelled"}},
    {absl::StatusCode::kInternal, true, {500, "internal"}},
    {absl::StatusCode::kUnknown, true, {500, "internal"}},
    {absl::StatusCode::kDataLoss, true, {500, "internal"}},
    {absl::StatusCode::kUnimplemented, true, {501, "not_implemented"}},
    {absl::StatusCode::kUnavailable, true, {503, "unavailable"}},
    {absl::StatusCode::kUnavailable, false, {503, kTooManyConnections}},
    {absl::StatusCode::kDeadlineExceeded, true, {504, "timeout"}},
    {absl::StatusCode::kResourceExhausted, false, {507, kInsufficientStorage}},
}};

constexpr ErrorKind kInternal = {500, "internal"};

std::optional<std::string> Payload(const absl::Status& status, absl::string_view url) {
  auto cord = status.GetPayload(url);  // absl::optional: not std::optional on Debian
  if (!cord.has_value()) {
    return std::nullopt;
  }
  return std::string(*cord);
}

}  // namespace

ErrorKind ErrorKindOf(const absl::Status& status) {
  if (status.ok()) {
    return kInternal;
  }
  if (std::optional<std::string> code = Payload(status, kCodePayloadUrl)) {
    for (const Row& row : kTable) {
      if (row.kind.code == *code) {
        return row.kind;
      }
    }
  }
  for (const Row& row : kTable) {
    if (row.is_default && row.status_code == status.code()) {
      return row.kind;
    }
  }
  return kInternal;
}

absl::Status WithErrorCode(absl::Status status, absl::string_view code) {
  status.SetPayload(kCodePayloadUrl, absl::Cord(code));
  return status;
}

absl::Status WithField(absl::Status status, absl::string_view field) {
  status.SetPayload(kFieldPayloadUrl, absl::Cord(field));
  return status;
}

std::optional<std::string> FieldOf(const absl::Status& status) {
  return Payload(status, kFieldPayloadUrl);
}

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  return WithField(absl::InvalidArgumentError(message), field);
}

absl::Status PayloadTooLargeError(absl::string_view message) {
  return WithErrorCode(absl::ResourceExhaustedError(message), kPayloadTooLarge);
}

std::string ErrorBody(absl::string_view code, absl::string_view message,
                      std::optional<absl::string_view> field) {
  nlohmann::json error = {{"code", std::string(code)}, {"message", std::string(message)}};
  if (field.has_value()) {
    error["field"] = std::string(*field);
  }
  // Messages may quote client input that is not UTF-8: replace rather than throw.
  return nlohmann::json{{"error", std::move(error)}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace);
}

ErrorFields ReadErrorBody(absl::string_view body) {
  ErrorFields out;
  nlohmann::json parsed =
      nlohmann::json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) {
    return out;
  }
  auto error = parsed.find("error");
  if (error == parsed.end() || !error->is_object()) {
    return out;
  }
  auto text = [&](const char* key) -> std::string {
    auto it = error->find(key);
    return it != error->end() && it->is_string() ? it->get<std::string>() : "";
  };
  out.code = text("code");
  out.message = text("message");
  out.field = text("field");
  return out;
}

ErrorResponse ErrorResponseFor(const absl::Status& status) {
  ErrorKind kind = ErrorKindOf(status);
  std::string message(status.message());
  if (status.ok()) {
    message = "internal error: an OK status was reported as an error";
  } else if (message.empty()) {
    message = absl::StatusCodeToString(status.code());
  }
  std::optional<std::string> field = FieldOf(status);
  std::optional<absl::string_view> field_view;
  if (field.has_value()) {
    field_view = *field;
  }
  return {kind.http_status, ErrorBody(kind.code, message, field_view)};
}

}  // namespace abox::api
