// End-to-end: a hostile guest agent (tests/e2e/hostile_guest.cc) in a real VM. The host must
// drop the connection, fail the sandbox with the reason, exit 125 and leave nothing behind.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/abox_runner.h"

namespace abox::testing {
namespace {

using ::testing::HasSubstr;

class HostileGuestTest : public ::testing::TestWithParam<std::pair<const char*, const char*>> {
 protected:
  static void SetUpTestSuite() {
    // Same rootfs as the default image (from the build cache); only the initramfs differs.
    auto r = BuildSharedImage({"--name", "hostile", "--guest-binary", ABOX_HOSTILE_GUEST});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
};

TEST_P(HostileGuestTest, HostDropsTheGuestAndSaysWhy) {
  auto [attack, reason] = GetParam();
  AboxCall call;
  call.args = {"run", "--image", "hostile", "--", attack};
  auto r = RunAbox(call);
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_THAT(r.err, HasSubstr("protocol violation")) << attack;
  EXPECT_THAT(r.err, HasSubstr(reason)) << attack;
  ExpectNoLeftovers();
}

INSTANTIATE_TEST_SUITE_P(Attacks, HostileGuestTest,
                         ::testing::Values(std::make_pair("oversize", "exceeds the maximum"),
                                           std::make_pair("unknown-type", "unknown type 200"),
                                           std::make_pair("unknown-stream", "unknown stream"),
                                           std::make_pair("credit-lie", "overflows the"),
                                           std::make_pair("bad-exit", "exit"),
                                           std::make_pair("flood", "not reading its channel")),
                         [](const auto& info) {
                           std::string n = info.param.first;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace abox::testing
