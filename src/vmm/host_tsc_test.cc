#include "src/vmm/host_tsc.h"

#include "gtest/gtest.h"

namespace abox::vmm {
namespace {

constexpr char kEpycCpuinfo[] = R"(processor	: 0
vendor_id	: AuthenticAMD
model name	: AMD EPYC
cpu MHz		: 2596.146
flags		: fpu vme tsc constant_tsc nonstop_tsc tsc_known_freq hypervisor

processor	: 1
cpu MHz		: 1800.000
)";

TEST(HostTscTest, ParsesCpuMhzOfFirstCpu) { EXPECT_EQ(ParseCpuinfoKhz(kEpycCpuinfo), 2596146u); }

TEST(HostTscTest, ParsesIntegerAndShortFractions) {
  EXPECT_EQ(ParseCpuinfoKhz("cpu MHz : 3000\n"), 3000000u);
  EXPECT_EQ(ParseCpuinfoKhz("cpu MHz\t: 2.5\n"), 2500u);
  EXPECT_EQ(ParseCpuinfoKhz("cpu MHz: 1234.5678\n"), 1234567u);  // truncated to kHz
}

TEST(HostTscTest, RejectsMissingOrMalformedValues) {
  EXPECT_FALSE(ParseCpuinfoKhz("model name : x\n").has_value());
  EXPECT_FALSE(ParseCpuinfoKhz("cpu MHz : abc\n").has_value());
  EXPECT_FALSE(ParseCpuinfoKhz("cpu MHz : -5\n").has_value());
  EXPECT_FALSE(ParseCpuinfoKhz("cpu MHz : 12.3x\n").has_value());
  EXPECT_FALSE(ParseCpuinfoKhz("cpu MHz : 0.000\n").has_value());
  EXPECT_FALSE(ParseCpuinfoKhz("cpu MHz : 99999999999\n").has_value());
  EXPECT_FALSE(ParseCpuinfoKhz("").has_value());
}

TEST(HostTscTest, FindsFlagsAsWholeWords) {
  EXPECT_TRUE(CpuinfoHasFlag(kEpycCpuinfo, "constant_tsc"));
  EXPECT_TRUE(CpuinfoHasFlag(kEpycCpuinfo, "tsc"));
  EXPECT_FALSE(CpuinfoHasFlag(kEpycCpuinfo, "tsc_known"));
  EXPECT_FALSE(CpuinfoHasFlag("", "tsc"));
}

TEST(HostTscTest, SysfsWinsOverEverything) {
  EXPECT_EQ(ChooseTscKhz(2000000, 3000000, 2500000), 2000000u);
}

TEST(HostTscTest, CpuinfoPreferredWhenItAgreesWithMeasurement) {
  EXPECT_EQ(ChooseTscKhz(std::nullopt, 2596146, 2597000), 2596146u);
}

TEST(HostTscTest, MeasurementWinsWhenCpuinfoShowsBoostClock) {
  EXPECT_EQ(ChooseTscKhz(std::nullopt, 3400000, 2596000), 2596000u);
}

TEST(HostTscTest, CpuinfoIsTheLastResort) {
  EXPECT_EQ(ChooseTscKhz(std::nullopt, 2596146, std::nullopt), 2596146u);
  EXPECT_FALSE(ChooseTscKhz(std::nullopt, std::nullopt, std::nullopt).has_value());
}

#if defined(__x86_64__)
TEST(HostTscTest, HostHasAFrequency) {
  absl::StatusOr<uint64_t> khz = HostTscKhz();
  ASSERT_TRUE(khz.ok()) << khz.status();
  EXPECT_GT(*khz, 100000u);  // > 100 MHz
}
#endif

}  // namespace
}  // namespace abox::vmm
