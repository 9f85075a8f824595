// Counting OOM kills: parsing /proc/vmstat, and the count an exec's kExit carries when the
// counter moved while the command ran (the test's command moves a fake vmstat itself).
#include "src/guest/oom_kills.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/guest/fake_host.h"
#include "src/proto/messages.h"

namespace abox::guest {
namespace {

using testing::ExecResult;
using testing::FakeHost;
using ::testing::IsEmpty;
using testing::Shell;

constexpr char kVmstat[] =
    "nr_free_pages 12345\n"
    "pgfault 99\n"
    "oom_kill 7\n"
    "compact_stall 0\n";

TEST(OomKillCounterTest, ReadsTheOomKillLine) {
  EXPECT_EQ(ParseOomKillCounter(kVmstat), 7u);
  EXPECT_EQ(ParseOomKillCounter("oom_kill 0"), 0u);
  EXPECT_EQ(ParseOomKillCounter("oom_kill 18446744073709551615\n"), UINT64_MAX);
}

TEST(OomKillCounterTest, NoNumberIsNoCounter) {
  EXPECT_EQ(ParseOomKillCounter(""), std::nullopt);
  EXPECT_EQ(ParseOomKillCounter("nr_free_pages 1\npgfault 2\n"), std::nullopt);  // kernel < 4.13
  EXPECT_EQ(ParseOomKillCounter("oom_kill\n"), std::nullopt);
  EXPECT_EQ(ParseOomKillCounter("oom_kill -1\n"), std::nullopt);
  EXPECT_EQ(ParseOomKillCounter("oom_kill lots\n"), std::nullopt);
  EXPECT_EQ(ParseOomKillCounter("oom_kill 99999999999999999999999\n"), std::nullopt);
  // Another counter whose name starts the same is not it.
  EXPECT_EQ(ParseOomKillCounter("oom_kill_total 5\n"), std::nullopt);
}

TEST(OomKillCounterTest, ReadsAFileAndNothingWithoutAPath) {
  std::string path = absl::StrCat(::testing::TempDir(), "/vmstat-", ::getpid());
  std::ofstream(path) << kVmstat;
  EXPECT_EQ(ReadOomKillCounter(path), 7u);
  EXPECT_EQ(ReadOomKillCounter(""), std::nullopt);
  EXPECT_EQ(ReadOomKillCounter(path + ".missing"), std::nullopt);
  std::filesystem::remove(path);
}

TEST(OomKillCounterTest, KillsBetweenReadingsAreBounded) {
  EXPECT_EQ(OomKillsBetween(7, 9), 2u);
  EXPECT_EQ(OomKillsBetween(7, 7), 0u);
  EXPECT_EQ(OomKillsBetween(9, 7), 0u);  // backwards: not believed
  EXPECT_EQ(OomKillsBetween(std::nullopt, 9), 0u);
  EXPECT_EQ(OomKillsBetween(7, std::nullopt), 0u);
  EXPECT_EQ(OomKillsBetween(0, UINT64_MAX), proto::kMaxOomKills);
}

// The agent with a vmstat of the test's that the command itself rewrites, as the kernel would
// when its OOM killer strikes.
class OomExecTest : public ::testing::Test {
 protected:
  OomExecTest() : dir_(MakeDir()), vmstat_(dir_ + "/vmstat"), host_(Options(vmstat_)) {
    WriteCounter(40);
    ::chmod(vmstat_.c_str(), 0666);  // the command may run as `agent`
    host_.Handshake();
  }
  ~OomExecTest() override { std::filesystem::remove_all(dir_); }

  static std::string MakeDir() {
    std::string tmpl = "/tmp/abox-oom-test-XXXXXX";
    std::string dir = ::mkdtemp(tmpl.data());
    ::chmod(dir.c_str(), 0777);  // the command may run as `agent` and remove the file
    return dir;
  }
  static Agent::Options Options(const std::string& vmstat) {
    Agent::Options o = testing::DefaultAgentOptions();
    o.oom_counter_path = vmstat;
    return o;
  }
  void WriteCounter(uint64_t n) { std::ofstream(vmstat_) << "pgfault 1\noom_kill " << n << "\n"; }
  // A shell line that sets the counter to `n`.
  std::string SetCounter(uint64_t n) {
    return absl::StrCat("printf 'pgfault 1\\noom_kill ", n, "\\n' > ", vmstat_);
  }

  std::string dir_;
  std::string vmstat_;
  FakeHost host_;
};

TEST_F(OomExecTest, ACommandKilledWhileTheCounterMovedReportsTheKills) {
  ExecResult r = host_.Run(Shell(absl::StrCat(SetCounter(43), "; kill -KILL $$")));
  EXPECT_THAT(r.problems, IsEmpty());
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.exit->signal, 9);
  EXPECT_EQ(r.exit->oom_kills, 3u);
}

TEST_F(OomExecTest, ACommandThatExitsReportsTheKillsOfItsChildren) {
  ExecResult r = host_.Run(Shell(absl::StrCat(SetCounter(41), "; exit 2")));
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.exit->exit_code, 2);
  EXPECT_EQ(r.exit->oom_kills, 1u);
}

TEST_F(OomExecTest, NoKillsNoCount) {
  ExecResult r = host_.Run(Shell("kill -KILL $$"));
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.exit->signal, 9);
  EXPECT_EQ(r.exit->oom_kills, 0u);
  // Each exec counts from its own start.
  WriteCounter(50);
  ExecResult next = host_.Run(Shell("true"));
  ASSERT_TRUE(next.exit);
  EXPECT_EQ(next.exit->oom_kills, 0u);
}

TEST_F(OomExecTest, ACounterGoneMidwayCountsNothing) {
  ExecResult r = host_.Run(Shell(absl::StrCat("rm -f ", vmstat_, "; exit 0")));
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.exit->oom_kills, 0u);
}

TEST(OomExecWithoutCounterTest, AnAgentOutsideAVmCountsNothing) {
  FakeHost host;  // no oom_counter_path, as outside a VM
  host.Handshake();
  ExecResult r = host.Run(Shell("kill -KILL $$"));
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.exit->oom_kills, 0u);
}

}  // namespace
}  // namespace abox::guest
