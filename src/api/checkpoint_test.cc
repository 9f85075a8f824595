#include "src/api/checkpoint.h"

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"

namespace abox::api {
namespace {

using ::testing::HasSubstr;

TEST(CheckpointApiTest, CheckpointRoundTrips) {
  Checkpoint c;
  c.id = "ck0123456789";
  c.name = "before-upgrade";
  c.sandbox_id = "0123456789ab";
  c.image = "default";
  c.cpus = 2;
  c.memory_mib = 1024;
  c.created_at = absl::FromUnixSeconds(1700000000);
  c.bytes = 123456789;
  c.save_ms = 210;
  c.workspace = true;
  absl::StatusOr<Checkpoint> back = DecodeCheckpoint(ToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
  absl::StatusOr<std::vector<Checkpoint>> list =
      DecodeCheckpointList(nlohmann::json{{"checkpoints", {ToJson(c), ToJson(c)}}});
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->size(), 2u);
  EXPECT_FALSE(DecodeCheckpoint(nlohmann::json{{"bytes", "many"}}).ok());
}

TEST(CheckpointApiTest, RequestsAreStrict) {
  EXPECT_EQ(DecodeCheckpointCreate("")->name, "");
  EXPECT_EQ(DecodeCheckpointCreate(R"({"name":"x"})")->name, "x");
  EXPECT_FALSE(DecodeCheckpointCreate(R"({"nmae":"x"})").ok());
  EXPECT_FALSE(DecodeCheckpointCreate(R"({"name":5})").ok());

  EXPECT_EQ(DecodeRestoreRequest(R"({"checkpoint":"ck01"})")->checkpoint, "ck01");
  absl::StatusOr<RestoreRequest> empty = DecodeRestoreRequest(R"({"checkpoint":""})");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("checkpoint"));
  EXPECT_FALSE(DecodeRestoreRequest("{}").ok());

  EXPECT_EQ(DecodeForkRequest("")->count, 1);
  absl::StatusOr<ForkRequest> fork = DecodeForkRequest(R"({"count":3,"name_prefix":"try"})");
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_EQ(fork->count, 3);
  EXPECT_EQ(fork->name_prefix, "try");
  EXPECT_FALSE(DecodeForkRequest(R"({"count":0})").ok());
  EXPECT_FALSE(DecodeForkRequest(R"({"count":33})").ok());
  EXPECT_EQ(ErrorKindOf(DecodeForkRequest(R"({"count":"2"})").status()).http_status, 400);
}

}  // namespace
}  // namespace abox::api
