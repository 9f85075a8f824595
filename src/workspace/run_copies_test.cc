#include "src/workspace/run_copies.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;

// A private $ABOX_HOME with a tmp/ dir, removed after the test.
class RunLeftoversTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "run-leftovers-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    home_ = tmpl;
    fs::create_directories(home_ / "tmp");
  }
  void TearDown() override { fs::remove_all(home_); }

  // A copy of a workspace as `abox run -w` leaves it: a tree with a file and its lock file.
  fs::path MakeCopy(const std::string& id, bool with_lock = true) {
    fs::path dir = home_ / "tmp" / ("run-workspace-" + id);
    fs::create_directories(dir / "objects" / "ab");
    std::ofstream(dir / "objects" / "ab" / "cdef") << "the user's source";
    if (with_lock) {
      std::ofstream(dir.string() + ".lock") << "";
    }
    return dir;
  }

  fs::path home_;
};

TEST_F(RunLeftoversTest, RemovesTheCopyOfAKilledRunAndItsLockFile) {
  fs::path dir = MakeCopy("sb-killed");
  fs::path old_style = MakeCopy("sb-before-locks", /*with_lock=*/false);
  absl::StatusOr<int> removed = CollectRunLeftovers(home_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(dir.string() + ".lock"));
  EXPECT_FALSE(fs::exists(old_style));
  EXPECT_FALSE(fs::exists(old_style.string() + ".lock"));
  EXPECT_TRUE(fs::is_empty(home_ / "tmp"));
}

TEST_F(RunLeftoversTest, NeverRemovesACopyWhoseLockALiveProcessHolds) {
  fs::path live = MakeCopy("sb-live");
  fs::path dead = MakeCopy("sb-dead");
  std::string lock_path = live.string() + ".lock";
  int ready[2];
  int release[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(release, O_CLOEXEC), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // a running `abox run`: holds its lock until told to end
    ::close(release[1]);
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
    char byte = (fd >= 0 && ::flock(fd, LOCK_EX) == 0) ? 'y' : 'n';
    (void)!::write(ready[1], &byte, 1);
    (void)!::read(release[0], &byte, 1);
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(release[0]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 'y');

  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<int> removed = CollectRunLeftovers(home_);
    ASSERT_TRUE(removed.ok()) << removed.status();
    EXPECT_EQ(*removed, round == 0 ? 1 : 0);
    EXPECT_TRUE(fs::exists(live / "objects" / "ab" / "cdef"));
    EXPECT_TRUE(fs::exists(lock_path));
  }
  EXPECT_FALSE(fs::exists(dead));

  // The run ends without cleaning up (as under SIGKILL): the kernel drops its lock, and the
  // next collection takes the copy.
  ::close(release[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(ready[0]);
  absl::StatusOr<int> removed = CollectRunLeftovers(home_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_FALSE(fs::exists(live));
  EXPECT_FALSE(fs::exists(lock_path));
}

TEST_F(RunLeftoversTest, NoTmpDirIsNothingToDo) {
  fs::remove_all(home_ / "tmp");
  absl::StatusOr<int> removed = CollectRunLeftovers(home_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 0);
}

}  // namespace
}  // namespace abox::workspace
