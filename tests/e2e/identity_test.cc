// End-to-end (issue 13, identity after every restore): the real `abox-guest identity` in a real
// VM, as root, fed the request the host side encodes (src/runtime/guest_identity.h). Bad
// requests change nothing; a good one sets the hostname, /etc/machine-id, /run/abox/sandbox-id
// and the wall clock (here one hour ahead, so the move is unmistakable), and seeds the kernel
// RNG (its ioctls fail the tool when refused). One VM for the whole test.
#include <iostream>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/runtime/guest_identity.h"
#include "tests/testing/abox_runner.h"

namespace abox::testing {
namespace {

using ::testing::HasSubstr;

// Each step prints KEY=VALUE lines (values on one line).
constexpr char kScript[] = R"SH(G=/run/abox/abox-guest
echo "host0=$(hostname)"; echo "mid0=$(cat /etc/machine-id 2>/dev/null)"; echo "t0=$(date +%s)"
printf '%s' '{"seed": not json' | $G identity >/tmp/o1 2>/tmp/e1; echo "bad_rc=$?"
echo "bad_out=$(cat /tmp/o1)"; echo "bad_err=$(cat /tmp/e1)"
printf '%s' '@BAD_HOSTNAME@' | $G identity 2>/tmp/e2; echo "badhost_rc=$?"; echo "badhost_err=$(cat /tmp/e2)"
echo "host1=$(hostname)"; echo "mid1=$(cat /etc/machine-id 2>/dev/null)"
echo "sid1=$([ -e /run/abox/sandbox-id ] && echo present || echo absent)"
printf '%s' '@GOOD@' | $G identity >/tmp/o3 2>/tmp/e3; echo "good_rc=$?"
echo "good_out=$(cat /tmp/o3)"; echo "good_err=$(cat /tmp/e3)"
echo "t2=$(date +%s)"; echo "host2=$(hostname)"; echo "uname2=$(uname -n)"
echo "mid2=$(cat /etc/machine-id)"; echo "sid2=$(cat /run/abox/sandbox-id)"
echo "modes=$(stat -c '%a:%U' /etc/machine-id /run/abox/sandbox-id | tr '\n' ' ')"
echo "end=1"
)SH";

std::map<std::string, std::string> ParseLines(const std::string& out) {
  std::map<std::string, std::string> values;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    values[kv.first] = kv.second;
  }
  return values;
}

int64_t Seconds(const std::string& text) {
  int64_t v = 0;
  EXPECT_TRUE(absl::SimpleAtoi(text, &v)) << "not a number: '" << text << "'";
  return v;
}

TEST(IdentityTest, TheGuestToolAppliesAGoodRequestAndNothingOfABadOne) {
  absl::StatusOr<runtime::GuestIdentity> identity = runtime::NewGuestIdentity("e2e-identity.1");
  ASSERT_TRUE(identity.ok()) << identity.status();
  ASSERT_EQ(identity->hostname, "abox-e2e-identity");
  // An hour ahead of the host, taken now: the guest's clock after the tool must be at least this
  // and at most this plus the time the run took.
  identity->now = absl::Now() + absl::Hours(1);
  const int64_t target = absl::ToUnixSeconds(identity->now);
  runtime::GuestIdentity bad = *identity;
  bad.hostname = "Bad_Host";

  AboxCall call;
  call.args = {
      "run",
      "--root",
      "--",
      "sh",
      "-c",
      absl::StrReplaceAll(kScript, {{"@GOOD@", runtime::EncodeIdentityRequest(*identity)},
                                    {"@BAD_HOSTNAME@", runtime::EncodeIdentityRequest(bad)}})};
  absl::Time started = absl::Now();
  AboxResult r = RunAbox(call);
  const int64_t took = absl::ToInt64Seconds(absl::Now() - started) + 1;
  std::cout << "guest output:\n" << r.out << "[stderr]\n" << r.err << "\n";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::string> v = ParseLines(r.out);
  ASSERT_EQ(v["end"], "1") << r.out;

  // Before: the boot defaults, and a clock near the host's.
  EXPECT_EQ(v["host0"], "abox");
  EXPECT_NEAR(Seconds(v["t0"]), target - 3600, took + 5);
  // Bad requests: exit 1, one clear line, nothing changed.
  EXPECT_EQ(v["bad_rc"], "1");
  EXPECT_EQ(v["bad_out"], "");
  EXPECT_EQ(v["bad_err"], "abox-guest identity: bad identity request: not one valid JSON value");
  EXPECT_EQ(v["badhost_rc"], "1");
  EXPECT_THAT(v["badhost_err"], HasSubstr("'hostname' must be 1-63 of [a-z0-9-]"));
  EXPECT_EQ(v["host1"], "abox");
  EXPECT_EQ(v["mid1"], v["mid0"]);
  EXPECT_EQ(v["sid1"], "absent");
  // The good request: everything applied.
  EXPECT_EQ(v["good_rc"], "0") << v["good_err"];
  EXPECT_EQ(v["good_out"], "{\"ok\":true}");
  EXPECT_EQ(v["good_err"], "");
  EXPECT_EQ(v["host2"], "abox-e2e-identity");
  EXPECT_EQ(v["uname2"], "abox-e2e-identity");
  EXPECT_EQ(v["mid2"], identity->machine_id);
  EXPECT_NE(v["mid2"], v["mid0"]);
  EXPECT_EQ(v["sid2"], "e2e-identity.1");
  EXPECT_EQ(v["modes"], "444:root 444:root ");
  int64_t t2 = Seconds(v["t2"]);
  EXPECT_GE(t2, target);
  EXPECT_LE(t2, target + took);
  EXPECT_NEAR(t2 - Seconds(v["t0"]), 3600, took + 5) << "the guest clock did not move ~1 h";
}

}  // namespace
}  // namespace abox::testing
