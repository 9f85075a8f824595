#include "src/cli/egress_commands.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

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
  std::vector<std::vector<std::string>> rows = EgressLogRows(log, 10);
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
  EXPECT_EQ(EgressLogRows(log, 1).size(), 1u);
}

TEST(EgressLogRowsTest, AMalformedAnswerGivesNoRowsInsteadOfThrowing) {
  EXPECT_TRUE(EgressLogRows(nlohmann::json::array(), 10).empty());
  EXPECT_TRUE(EgressLogRows({{"connections", "nope"}, {"dns", 3}}, 10).empty());
  std::vector<std::vector<std::string>> rows =
      EgressLogRows({{"connections", {{{"port", "x"}, {"bytes_up", -1}}}}}, 10);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][2], "-");
}

TEST(EgressFooterTest, SaysWhatTheSandboxsLimitsDroppedAndNothingWhenNothingWas) {
  nlohmann::json log = {
      {"dropped", {{"queue", 19000}, {"connections", 40000}, {"dns", 0}, {"events", 3}}}};
  std::string footer = EgressLogFooter(log);
  EXPECT_THAT(footer, HasSubstr("19000 refused names not queued"));
  EXPECT_THAT(footer, HasSubstr("40000 older connection rows"));
  EXPECT_THAT(footer, HasSubstr("3 older events"));
  EXPECT_THAT(footer, ::testing::Not(HasSubstr("lookup")));
  EXPECT_EQ(EgressLogFooter({{"dropped", {{"queue", 0}}}}), "");
  EXPECT_EQ(EgressLogFooter({{"dropped", "lots"}}), "");

  nlohmann::json queue = {{"requests", nlohmann::json::array()},
                          {"queue_cap", 1000},
                          {"queue_full", {{{"sandbox", "0123456789ab"}, {"dropped", 7}}}}};
  EXPECT_THAT(EgressQueueFooter(queue),
              HasSubstr("sandbox 0123456789ab: 7 refused name(s) were not queued: its queue was "
                        "full (1000 pending)"));
  EXPECT_EQ(EgressQueueFooter({{"queue_full", nlohmann::json::array()}}), "");
}

}  // namespace
}  // namespace abox::cli
