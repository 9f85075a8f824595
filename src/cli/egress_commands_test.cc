#include "src/cli/egress_commands.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"

namespace abox::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The API's JSON as the CLI gets it: decoded by the api codecs.
api::EgressLog Log(const nlohmann::json& j) {
  absl::StatusOr<api::EgressLog> log = api::DecodeEgressLog(j);
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? *log : api::EgressLog{};
}
api::EgressQueue Queue(const nlohmann::json& j) {
  absl::StatusOr<api::EgressQueue> queue = api::DecodeEgressQueue(j);
  EXPECT_TRUE(queue.ok()) << queue.status();
  return queue.ok() ? *queue : api::EgressQueue{};
}

TEST(EgressLogRowsTest, MergesConnectionsAndLookupsNewestFirst) {
  nlohmann::json log = {{"connections",
                         {{{"time", "2026-11-30T10:00:03.000Z"},
                           {"kind", "tls"},
                           {"name", "pypi.org"},
                           {"address", "151.101.0.223"},
                           {"port", 443},
                           {"verdict", "allowed"},
                           {"matched_rule", "preset:pypi (pypi.org)"},
                           {"bytes_up", 2048},
                           {"bytes_down", 1048576},
                           {"duration_ms", 120}},
                          {{"time", "2026-11-30T10:00:01.000Z"},
                           {"kind", "http"},
                           {"name", "evil.example"},
                           {"address", ""},
                           {"port", 80},
                           {"verdict", "denied"},
                           {"reason", "no rule allows evil.example:80"},
                           {"via_override", true}}}},
                        {"dns",
                         {{{"time", "2026-11-30T10:00:02.000Z"},
                           {"name", "pypi.org"},
                           {"verdict", "allowed"},
                           {"answers", {"151.101.0.223", "2a04:4e42::223"}},
                           {"matched_rule", "preset:pypi (pypi.org)"}}}}};
  std::vector<std::vector<std::string>> rows = EgressLogRows(Log(log), 10);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][1], "tls");
  EXPECT_EQ(rows[0][3], "151.101.0.223:443");
  EXPECT_EQ(rows[0][5], "2.0 KiB");
  EXPECT_EQ(rows[0][6], "1.0 MiB");
  EXPECT_EQ(rows[0][7], "120ms");
  EXPECT_EQ(rows[1][1], "dns");
  EXPECT_EQ(rows[1][3], "151.101.0.223,2a04:4e42::223");
  EXPECT_EQ(rows[2][3], "-:80");
  EXPECT_EQ(rows[2][4], "denied");
  EXPECT_THAT(rows[2][8], HasSubstr("no rule allows"));
  EXPECT_THAT(rows[2][8], HasSubstr("[test override]"));
  EXPECT_EQ(EgressLogRows(Log(log), 1).size(), 1u);
}

TEST(EgressLogRowsTest, AMalformedAnswerIsRefusedNamingTheFieldInsteadOfThrowing) {
  // Malformed answers no longer reach the rows: they do not decode, and the error names the
  // field (they used to give no rows).
  EXPECT_FALSE(api::DecodeEgressLog(nlohmann::json::array()).ok());
  EXPECT_EQ(api::FieldOf(api::DecodeEgressLog({{"connections", "nope"}, {"dns", 3}}).status())
                .value_or(""),
            "connections");
  EXPECT_EQ(api::FieldOf(api::DecodeEgressLog({{"connections", {{{"port", "x"}}}}}).status())
                .value_or(""),
            "connections[0].port");
  EXPECT_TRUE(EgressLogRows(api::EgressLog{}, 10).empty());
  std::vector<std::vector<std::string>> rows =
      EgressLogRows(Log({{"connections", {{{"bytes_up", -1}}}}}), 10);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][2], "-");
}

TEST(EgressFooterTest, SaysWhatTheSandboxsLimitsDroppedAndNothingWhenNothingWas) {
  nlohmann::json log = {
      {"dropped", {{"queue", 19000}, {"connections", 40000}, {"dns", 0}, {"events", 3}}}};
  std::string footer = EgressLogFooter(Log(log));
  EXPECT_THAT(footer, HasSubstr("19000 refused names not queued"));
  EXPECT_THAT(footer, HasSubstr("40000 older connection rows"));
  EXPECT_THAT(footer, HasSubstr("3 older events"));
  EXPECT_THAT(footer, ::testing::Not(HasSubstr("lookup")));
  EXPECT_EQ(EgressLogFooter(Log({{"dropped", {{"queue", 0}}}})), "");
  EXPECT_EQ(api::FieldOf(api::DecodeEgressLog({{"dropped", "lots"}}).status()).value_or(""),
            "dropped");

  nlohmann::json queue = {{"requests", nlohmann::json::array()},
                          {"queue_cap", 1000},
                          {"queue_full", {{{"sandbox", "0123456789ab"}, {"dropped", 7}}}}};
  EXPECT_THAT(EgressQueueFooter(Queue(queue)),
              HasSubstr("sandbox 0123456789ab: 7 refused name(s) were not queued: its queue was "
                        "full (1000 pending)"));
  EXPECT_EQ(EgressQueueFooter(Queue({{"queue_full", nlohmann::json::array()}})), "");
}

}  // namespace
}  // namespace abox::cli
