#include "src/api/errors.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace abox::api {
namespace {

using nlohmann::json;

struct Case {
  absl::Status status;
  int http_status;
  std::string code;
};

TEST(ErrorsTest, MapsEveryStatusCodeThroughTheTable) {
  const Case cases[] = {
      {absl::InvalidArgumentError("x"), 400, "bad_request"},
      {absl::OutOfRangeError("x"), 400, "bad_request"},
      {absl::UnauthenticatedError("x"), 401, "unauthenticated"},
      {absl::PermissionDeniedError("x"), 403, "forbidden"},
      {absl::NotFoundError("x"), 404, "not_found"},
      {absl::AlreadyExistsError("x"), 409, "conflict"},
      {absl::FailedPreconditionError("x"), 409, "conflict"},
      {absl::AbortedError("x"), 409, "conflict"},
      {absl::ResourceExhaustedError("x"), 429, "no_capacity"},
      {absl::CancelledError("x"), 499, "cancelled"},
      {absl::InternalError("x"), 500, "internal"},
      {absl::UnknownError("x"), 500, "internal"},
      {absl::DataLossError("x"), 500, "internal"},
      {absl::UnimplementedError("x"), 501, "not_implemented"},
      {absl::UnavailableError("x"), 503, "unavailable"},
      {absl::DeadlineExceededError("x"), 504, "timeout"},
  };
  for (const Case& c : cases) {
    ErrorKind kind = ErrorKindOf(c.status);
    EXPECT_EQ(kind.http_status, c.http_status) << c.status;
    EXPECT_EQ(std::string(kind.code), c.code) << c.status;
  }
}

TEST(ErrorsTest, OkStatusIsAnInternalError) {
  ErrorResponse r = ErrorResponseFor(absl::OkStatus());
  EXPECT_EQ(r.http_status, 500);
  json body = json::parse(r.body);
  EXPECT_EQ(body["error"]["code"], "internal");
  EXPECT_FALSE(body["error"]["message"].get<std::string>().empty());
}

TEST(ErrorsTest, AttachedCodeOverridesTheDefaultRow) {
  ErrorKind too_large = ErrorKindOf(PayloadTooLargeError("body over 1 MiB"));
  EXPECT_EQ(too_large.http_status, 413);
  EXPECT_EQ(too_large.code, kPayloadTooLarge);
  ErrorKind not_allowed =
      ErrorKindOf(WithErrorCode(absl::UnimplementedError("no"), kMethodNotAllowed));
  EXPECT_EQ(not_allowed.http_status, 405);
  EXPECT_EQ(not_allowed.code, kMethodNotAllowed);
  ErrorKind busy = ErrorKindOf(WithErrorCode(absl::UnavailableError("busy"), kTooManyConnections));
  EXPECT_EQ(busy.http_status, 503);
  EXPECT_EQ(busy.code, kTooManyConnections);
}

TEST(ErrorsTest, UnknownAttachedCodeFallsBackToTheStatusCode) {
  ErrorKind kind = ErrorKindOf(WithErrorCode(absl::NotFoundError("x"), "made_up"));
  EXPECT_EQ(kind.http_status, 404);
  EXPECT_EQ(kind.code, "not_found");
}

TEST(ErrorsTest, BodyHasCodeMessageAndField) {
  ErrorResponse r = ErrorResponseFor(FieldError("cpus", "field \"cpus\" must be an integer"));
  EXPECT_EQ(r.http_status, 400);
  EXPECT_EQ(
      r.body,
      R"({"error":{"code":"bad_request","field":"cpus","message":"field \"cpus\" must be an integer"}})");
}

TEST(ErrorsTest, BodyOmitsFieldWhenThereIsNone) {
  json body = json::parse(ErrorResponseFor(absl::NotFoundError("no sandbox \"x1\"")).body);
  EXPECT_EQ(body, (json{{"error", {{"code", "not_found"}, {"message", "no sandbox \"x1\""}}}}));
}

TEST(ErrorsTest, FieldRoundTripsAndIsAbsentByDefault) {
  EXPECT_EQ(FieldOf(absl::InvalidArgumentError("x")), std::nullopt);
  EXPECT_EQ(FieldOf(WithField(absl::InvalidArgumentError("x"), "argv[1]")), "argv[1]");
}

TEST(ErrorsTest, InvalidUtf8InMessageIsReplacedNotThrown) {
  std::string body = ErrorBody("bad_request", std::string("bad \xff name"));
  json parsed = json::parse(body, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << body;
  EXPECT_THAT(parsed["error"]["message"].get<std::string>(), testing::HasSubstr("bad "));
}

TEST(ErrorsTest, EmptyMessageIsFilledWithTheCodeName) {
  json body = json::parse(ErrorResponseFor(absl::Status(absl::StatusCode::kNotFound, "")).body);
  EXPECT_EQ(body["error"]["message"], "NOT_FOUND");
}

}  // namespace
}  // namespace abox::api
