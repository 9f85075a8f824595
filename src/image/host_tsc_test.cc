#include "src/image/host_tsc.h"

#include "gtest/gtest.h"

namespace abox::image {
namespace {

TEST(HostTscTest, ConvertsMhzToKhzExactly) {
  EXPECT_EQ(MhzStringToKhz("2596.146"), 2596146u);
  EXPECT_EQ(MhzStringToKhz(" 3000 "), 3000000u);
  EXPECT_EQ(MhzStringToKhz("2999.9999"), 2999999u);  // truncated, not rounded via floats
  EXPECT_EQ(MhzStringToKhz("1.5"), 1500u);
  EXPECT_EQ(MhzStringToKhz("abc"), std::nullopt);
  EXPECT_EQ(MhzStringToKhz("12.3x"), std::nullopt);
  EXPECT_EQ(MhzStringToKhz("0.000"), std::nullopt);
  EXPECT_EQ(MhzStringToKhz(""), std::nullopt);
}

TEST(HostTscTest, PrefersRefinedCalibrationInKernelLog) {
  const char* log =
      "[    0.000057] tsc: Detected 2596.146 MHz processor\n"
      "[    1.100000] tsc: Refined TSC clocksource calibration: 2595.999 MHz\n"
      "[    1.2] clocksource: Switched to clocksource tsc\n";
  EXPECT_EQ(ParseTscKhzFromKernelLog(log), 2595999u);
  EXPECT_EQ(ParseTscKhzFromKernelLog("[0.0] tsc: Detected 2596.146 MHz processor\n"), 2596146u);
  EXPECT_EQ(ParseTscKhzFromKernelLog("[0.0] tsc: Fast TSC calibration failed\n"), std::nullopt);
}

TEST(HostTscTest, ParsesCpuinfo) {
  EXPECT_EQ(ParseTscKhzFromCpuinfo("processor\t: 0\nmodel name\t: X\ncpu MHz\t\t: 2100.000\n"),
            2100000u);
  EXPECT_EQ(ParseTscKhzFromCpuinfo("processor\t: 0\n"), std::nullopt);
}

}  // namespace
}  // namespace abox::image
