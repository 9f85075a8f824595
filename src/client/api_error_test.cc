#include "src/client/api_error.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"

namespace abox::client {
namespace {

using ::testing::HasSubstr;

struct Row {
  int http;
  const char* code;
  absl::StatusCode expected;
};

// Every stable code of docs/openapi.yaml with its HTTP status.
constexpr Row kRows[] = {
    {400, "bad_request", absl::StatusCode::kInvalidArgument},
    {401, "unauthenticated", absl::StatusCode::kUnauthenticated},
    {403, "forbidden", absl::StatusCode::kPermissionDenied},
    {404, "not_found", absl::StatusCode::kNotFound},
    {405, "method_not_allowed", absl::StatusCode::kUnimplemented},
    {408, "request_timeout", absl::StatusCode::kDeadlineExceeded},
    {409, "conflict", absl::StatusCode::kFailedPrecondition},
    {413, "payload_too_large", absl::StatusCode::kResourceExhausted},
    {429, "no_capacity", absl::StatusCode::kResourceExhausted},
    {500, "internal", absl::StatusCode::kInternal},
    {501, "not_implemented", absl::StatusCode::kUnimplemented},
    {503, "unavailable", absl::StatusCode::kUnavailable},
    {503, "too_many_connections", absl::StatusCode::kUnavailable},
    {504, "timeout", absl::StatusCode::kDeadlineExceeded},
};

TEST(ApiErrorTest, EveryStableCodeMapsBackAndRoundTripsThroughTheServerTable) {
  for (const Row& row : kRows) {
    std::string body = api::ErrorBody(row.code, "what failed; what to do");
    absl::Status s = StatusFromHttpError(row.http, body);
    EXPECT_EQ(s.code(), row.expected) << row.code;
    EXPECT_EQ(s.message(), "what failed; what to do");
    // The server's table turns the status back into the same answer.
    api::ErrorKind kind = api::ErrorKindOf(s);
    EXPECT_EQ(kind.http_status, row.http) << row.code;
    EXPECT_EQ(kind.code, row.code);
  }
}

TEST(ApiErrorTest, KeepsTheField) {
  absl::Status s = StatusFromHttpError(400, api::ErrorBody("bad_request", "cpus: 0 < 1", "cpus"));
  EXPECT_EQ(api::FieldOf(s), "cpus");
}

TEST(ApiErrorTest, UnknownCodeFallsBackToTheHttpStatus) {
  absl::Status s = StatusFromHttpError(409, api::ErrorBody("future_code", "busy"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "busy");
  EXPECT_EQ(StatusFromHttpError(418, "").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusFromHttpError(599, "").code(), absl::StatusCode::kUnknown);
}

TEST(ApiErrorTest, BodyThatIsNotTheApiErrorIsQuoted) {
  absl::Status s = StatusFromHttpError(502, "<html>bad\x01gateway</html>");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("HTTP 502"));
  EXPECT_THAT(s.message(), HasSubstr("<html>bad gateway</html>"));
  EXPECT_THAT(StatusFromHttpError(500, "{\"error\": 3}").message(), HasSubstr("HTTP 500"));
}

}  // namespace
}  // namespace abox::client
