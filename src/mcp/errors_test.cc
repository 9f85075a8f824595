#include "src/mcp/errors.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"
#include "src/mcp/json_rpc.h"

namespace abox::mcp {
namespace {

using ::testing::HasSubstr;

TEST(McpErrorsTest, EveryStatusCodeHasARowWithANextStep) {
  for (int c = 1; c <= 16; ++c) {
    absl::Status s(static_cast<absl::StatusCode>(c), "boom");
    const McpErrorKind& kind = McpErrorKindOf(s);
    EXPECT_FALSE(kind.label.empty()) << c;
    EXPECT_FALSE(kind.next_step.empty()) << c;
    EXPECT_LE(kind.json_rpc_code, -32600) << c;
    EXPECT_GE(kind.json_rpc_code, -32700) << c;
  }
}

TEST(McpErrorsTest, MapsTheCodesToolsRunInto) {
  EXPECT_EQ(McpErrorKindOf(absl::InvalidArgumentError("x")).json_rpc_code, kInvalidParams);
  EXPECT_EQ(McpErrorKindOf(absl::UnimplementedError("x")).json_rpc_code, kMethodNotFound);
  EXPECT_EQ(McpErrorKindOf(absl::InternalError("x")).json_rpc_code, kInternalError);
  EXPECT_EQ(McpErrorKindOf(absl::NotFoundError("x")).label, "not_found");
  EXPECT_EQ(McpErrorKindOf(absl::ResourceExhaustedError("x")).label, "no_capacity");
  EXPECT_EQ(McpErrorKindOf(absl::PermissionDeniedError("x")).label, "not_allowed");
  // OK is a caller bug: never a success label.
  EXPECT_EQ(McpErrorKindOf(absl::OkStatus()).label, "internal");
}

TEST(McpErrorsTest, AToolErrorResultSaysWhatFailedAndWhatToDo) {
  nlohmann::json r = ToolErrorResult(absl::NotFoundError("no sandbox \"web\""));
  EXPECT_EQ(r["isError"], true);
  ASSERT_EQ(r["content"].size(), 1u);
  EXPECT_EQ(r["content"][0]["type"], "text");
  std::string text = r["content"][0]["text"];
  EXPECT_THAT(text, HasSubstr("not_found: no sandbox \"web\""));
  EXPECT_THAT(text, HasSubstr("sandbox_list"));
  EXPECT_THAT(ToolErrorText(absl::ResourceExhaustedError("8 of 8 vCPUs in use")),
              HasSubstr("8 of 8 vCPUs in use\nNext: The host's budget is full"));
}

TEST(McpErrorsTest, AboxdsStorageAndSizeRefusalsAreNotTheCapacityBudget) {
  // Both reach the client as kResourceExhausted with aboxd's stable code attached (507, 413).
  absl::Status storage = api::WithErrorCode(
      absl::ResourceExhaustedError("the sandbox's changes need 5 GiB; the quota is 4 GiB"),
      api::kInsufficientStorage);
  EXPECT_EQ(McpErrorKindOf(storage).label, "no_storage");
  EXPECT_THAT(ToolErrorText(storage), HasSubstr("--workspace-quota"));
  EXPECT_THAT(ToolErrorText(storage), ::testing::Not(HasSubstr("budget is full")));
  absl::Status large =
      api::WithErrorCode(absl::ResourceExhaustedError("body over 16 MiB"), api::kPayloadTooLarge);
  EXPECT_EQ(McpErrorKindOf(large).label, "too_large");
  EXPECT_EQ(McpErrorKindOf(large).json_rpc_code, kInvalidParams);
  // Without a code it is still the budget.
  EXPECT_EQ(McpErrorKindOf(absl::ResourceExhaustedError("8 of 8 vCPUs")).label, "no_capacity");
}

TEST(McpErrorsTest, ProtocolErrorsTakeTheirJsonRpcCodeFromTheTable) {
  nlohmann::json unknown = ErrorAnswer(7, absl::UnimplementedError("Method not found: x"));
  EXPECT_EQ(unknown["id"], 7);
  EXPECT_EQ(unknown["error"]["code"], kMethodNotFound);
  EXPECT_EQ(unknown["error"]["message"], "Method not found: x");
  EXPECT_EQ(ErrorAnswer("a", absl::InvalidArgumentError("bad"))["error"]["code"], kInvalidParams);
  EXPECT_EQ(ErrorAnswer("a", absl::ResourceExhaustedError("full"))["error"]["code"],
            kInternalError);
}

}  // namespace
}  // namespace abox::mcp
