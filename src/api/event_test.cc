#include "src/api/event.h"

#include "gtest/gtest.h"
#include "src/api/errors.h"

namespace abox::api {
namespace {

TEST(EventJsonTest, EncodeThenDecodeGivesTheSameEvent) {
  Event e{.seq = 12,
          .time = absl::FromUnixMillis(1764518731123),
          .type = "exec_finished",
          .sandbox_id = "3fa9c1b2d4e5",
          .payload = {{"exec_id", "e1"}, {"exit_code", 0}}};
  nlohmann::json j = ToJson(e);
  EXPECT_EQ(j["time"], "2025-11-30T16:05:31.123Z");
  absl::StatusOr<Event> back = DecodeEvent(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, e);
  Event daemon_wide{.seq = 1, .time = absl::FromUnixSeconds(0), .type = "started"};
  EXPECT_FALSE(ToJson(daemon_wide).contains("sandbox_id"));
  EXPECT_EQ(*DecodeEvent(ToJson(daemon_wide)), daemon_wide);
}

TEST(EventJsonTest, DecodeNamesMistypedFields) {
  EXPECT_TRUE(DecodeEvent({{"type", "ready"}, {"extra", true}}).ok());
  for (const auto& [value, field] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"seq", "1"}}, "seq"}, {{{"type", 3}}, "type"}, {{{"time", "noon"}}, "time"}}) {
    absl::StatusOr<Event> e = DecodeEvent(value);
    ASSERT_FALSE(e.ok()) << value;
    EXPECT_EQ(FieldOf(e.status()).value_or(""), field) << e.status();
  }
  EXPECT_EQ(MissedEventJson()["message"],
            "older events were dropped by retention: re-list the sandboxes");
}

}  // namespace
}  // namespace abox::api
