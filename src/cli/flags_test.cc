#include "src/cli/flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::cli {
namespace {

using ::testing::HasSubstr;

TEST(ParseDurationSecondsTest, UnitsDaysAndCombinations) {
  EXPECT_EQ(*ParseDurationSeconds("--ttl", "30s"), 30);
  EXPECT_EQ(*ParseDurationSeconds("--ttl", "10m"), 600);
  EXPECT_EQ(*ParseDurationSeconds("--ttl", "2h"), 7200);
  EXPECT_EQ(*ParseDurationSeconds("--ttl", "1d"), 86400);
  EXPECT_EQ(*ParseDurationSeconds("--ttl", "1d12h"), 86400 + 12 * 3600);
  EXPECT_EQ(*ParseDurationSeconds("--ttl", "1h30m"), 5400);
  EXPECT_EQ(*ParseDurationSeconds("--ttl", "0"), 0);
  EXPECT_EQ(*ParseDurationSeconds("--ttl", "1500ms"), 2);  // rounds up
}

TEST(ParseDurationSecondsTest, RejectsWhatIsNotADurationSayingWhatToType) {
  for (const char* bad : {"", "30", "abc", "-5m", "1x", "d", "1d-2h", "inf"}) {
    absl::StatusOr<int64_t> r = ParseDurationSeconds("--idle-timeout", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--idle-timeout"));
    EXPECT_THAT(r.status().message(), HasSubstr("30s, 10m, 2h, 1d"));
  }
}

TEST(ParseSizeMibTest, UnitsAreBinaryAndABareNumberIsMib) {
  EXPECT_EQ(*ParseSizeMib("--disk", "32G"), 32768);
  EXPECT_EQ(*ParseSizeMib("--disk", "32GiB"), 32768);
  EXPECT_EQ(*ParseSizeMib("--disk", "32gib"), 32768);
  // Decimal-looking units are refused, as in .abox.toml: 32GB could mean either.
  absl::StatusOr<int64_t> gb = ParseSizeMib("--disk", "32GB");
  ASSERT_FALSE(gb.ok());
  EXPECT_THAT(std::string(gb.status().message()), HasSubstr("ambiguous"));
  EXPECT_EQ(*ParseSizeMib("--disk", "500M"), 500);
  EXPECT_EQ(*ParseSizeMib("--disk", "2048"), 2048);
  EXPECT_EQ(*ParseSizeMib("--disk", "1T"), 1048576);
}

TEST(ParseSizeMibTest, RejectsWhatIsNotASizeSayingWhatToType) {
  for (const char* bad : {"", "G", "-1G", "1.5G", "32 G", "32K", "12345678901G", "lots"}) {
    absl::StatusOr<int64_t> v = ParseSizeMib("--disk", bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_THAT(std::string(v.status().message()),
                ::testing::HasSubstr("--disk expects a size such as 32G"))
        << bad;
  }
}

TEST(ParseKeyValuesTest, SplitsAtTheFirstEqualsAndLaterRepeatsWin) {
  absl::StatusOr<std::map<std::string, std::string>> kv =
      ParseKeyValues("-l", "KEY=VALUE", {"app=web", "expr=a=b", "empty=", "app=api"});
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(*kv,
            (std::map<std::string, std::string>{{"app", "api"}, {"expr", "a=b"}, {"empty", ""}}));
}

TEST(ParseKeyValuesTest, NamesTheFlagAndTheBadItem) {
  EXPECT_EQ(ParseKeyValues("-e", "NAME=VALUE", {"FOO"}).status().message(),
            "-e expects NAME=VALUE, got 'FOO'");
  EXPECT_FALSE(ParseKeyValues("-l", "KEY=VALUE", {"=x"}).ok());
}

TEST(FormatAgeTest, LargestWholeUnit) {
  EXPECT_EQ(FormatAge(absl::Seconds(45)), "45s");
  EXPECT_EQ(FormatAge(absl::Minutes(12) + absl::Seconds(59)), "12m");
  EXPECT_EQ(FormatAge(absl::Hours(3)), "3h");
  EXPECT_EQ(FormatAge(absl::Hours(50)), "2d");
  EXPECT_EQ(FormatAge(-absl::Seconds(3)), "0s");  // clocks disagree a little
}

TEST(ShellJoinTest, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(ShellJoin({"make", "-j4", "CC=gcc", "a/b.c"}), "make -j4 CC=gcc a/b.c");
  EXPECT_EQ(ShellJoin({"sh", "-c", "echo $HOME; ls"}), "sh -c 'echo $HOME; ls'");
  EXPECT_EQ(ShellJoin({"echo", "it's", ""}), "echo 'it'\\''s' ''");
}

TEST(LastLinesTest, KeepsTheLastNLines) {
  EXPECT_EQ(LastLines("a\nb\nc\n", 2), "b\nc\n");
  EXPECT_EQ(LastLines("a\nb\nc", 1), "c");
  EXPECT_EQ(LastLines("a\nb\n", 5), "a\nb\n");
  EXPECT_EQ(LastLines("", 3), "");
}

}  // namespace
}  // namespace abox::cli
