// Issue item 5: guest workspace tools that hang (never answer `ws manifest`, never read
// `ws unpack`) fail their own operation within the deadline and never stall another sandbox or
// the daemon's workers.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/self_path.h"
#include "src/daemon/testing/workspace_api_fixture.h"
#include "src/runtime/agent_guest_tools.h"
#include "src/workspace/guest_tools.h"

namespace abox::daemon {
namespace {

namespace fs = std::filesystem;
using http::httptest::HttpTestClient;
using http::httptest::Response;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::WorkspaceApiTest;
using testing::WriteAll;

// Issue item 5: a hostile guest's replaced `abox-guest` that never answers `ws manifest` or
// never reads `ws unpack` (the replaced tool a guest root can install; it runs through the
// real agent). `stuck` names the subcommand that hangs; the others run the real tool.
std::string WriteStuckTool(const fs::path& dir, const std::string& stuck, const std::string& mark) {
  auto real = base::FindCompanionBinary("abox-guest", "ABOX_GUEST_BIN");
  EXPECT_TRUE(real.ok()) << real.status();
  fs::path script = dir / ("stuck-" + stuck);
  WriteAll(script, absl::StrCat("#!/bin/sh\nif [ \"$2\" = ", stuck, " ]; then exec sleep ", mark,
                                "; fi\nexec ", real.ok() ? *real : "false", " \"$@\"\n"));
  fs::permissions(script, fs::perms::owner_all);
  return script.string();
}

// Processes whose command line is `sleep <mark>`.
int SleepersWith(const std::string& mark) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    n += cmdline == std::string("sleep\0", 6) + mark + std::string(1, '\0') ? 1 : 0;
  }
  return n;
}

// Ends the `sleep <mark>` processes this test's stuck tools started (by pid).
void KillSleepers(const std::string& mark) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    pid_t pid = 0;
    if (cmdline == std::string("sleep\0", 6) + mark + std::string(1, '\0') &&
        absl::SimpleAtoi(entry.path().filename().string(), &pid)) {
      ::kill(pid, SIGKILL);
    }
  }
}

class GuestDeadlineTest : public WorkspaceApiTest {
 protected:
  void SetUp() override {
    WorkspaceApiTest::SetUp();
    Restart(absl::Seconds(3));
  }
  // Restarts the daemon with guest tools that get `floor` before they are killed.
  void Restart(absl::Duration floor) {
    client_.reset();
    daemon_->Shutdown();
    daemon_->set_guest_tool_deadline(
        {.floor = floor, .bytes_per_second = 64 << 20, .kill_grace = absl::Seconds(2)});
    daemon_->Start();
    client_ = daemon_->Connect();
    ASSERT_NE(client_, nullptr);
  }
  void UseTool(const std::string& path) {
    daemon_->set_guest_tools_wrapper([path](workspace::GuestTools& real) {
      return static_cast<runtime::AgentGuestTools&>(real).WithToolPath(path);
    });
  }
};

TEST_F(GuestDeadlineTest, AStuckGuestToolFailsItsOperationAndNeverStallsAnotherSandbox) {
  std::string a = Create();
  Response plain = Call("POST", "/v1/sandboxes", "{}");
  ASSERT_EQ(plain.status, 201) << plain.body;
  std::string b = plain.Json().value("id", "");
  const std::string mark = absl::StrCat(900000 + ::getpid() % 99999);
  UseTool(WriteStuckTool(tmp_.path(), "manifest", mark));

  // More stuck requests for A than the daemon has blocking workers (8); a diff asks the guest
  // for its manifest.
  constexpr int kStuck = 12;
  std::atomic<int> a_returned{0};
  std::vector<Response> results(kStuck);
  std::vector<std::thread> stuck;
  for (int i = 0; i < kStuck; ++i) {
    stuck.emplace_back([&, i] {
      std::unique_ptr<HttpTestClient> c = daemon_->Connect();
      absl::StatusOr<Response> r = c->Request("GET", absl::StrCat("/v1/sandboxes/", a, "/diff"));
      if (r.ok()) {
        results[i] = *r;
      }
      if (results[i].status == 504) {
        ++a_returned;
      }
    });
  }
  // Wait until A's tool is really stuck in the guest (A's operations run one at a time: the
  // second in flight waits for the workspace).
  for (int i = 0; i < 1000 && SleepersWith(mark) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(SleepersWith(mark), 1) << "an operation of A holds the guest tools";

  // Meanwhile B's exec, stop and rm go through, before any of A's stuck calls has ended.
  Response exec = Post(b, "execs", {{"argv", {"echo", "from-b"}}});
  EXPECT_EQ(exec.status, 201) << exec.body;
  EXPECT_EQ(Call("POST", absl::StrCat("/v1/sandboxes/", b, "/stop")).status, 200);
  EXPECT_EQ(Call("DELETE", absl::StrCat("/v1/sandboxes/", b)).status, 204);
  EXPECT_EQ(a_returned.load(), 0) << "B waited for A's stuck guest tools";

  for (std::thread& t : stuck) {
    t.join();
  }
  int timed_out = 0;
  int refused = 0;
  for (const Response& r : results) {
    if (r.status == 504) {
      ++timed_out;
      EXPECT_THAT(r.body, HasSubstr("abox-guest ws manifest in sandbox " + a));
      EXPECT_THAT(r.body, HasSubstr("did not finish within"));
    } else {
      EXPECT_EQ(r.status, 409) << r.body;
      EXPECT_THAT(r.body, HasSubstr("workspace operations in flight"));
      ++refused;
    }
  }
  EXPECT_EQ(timed_out, 2);
  EXPECT_EQ(refused, kStuck - 2);
  // The stuck tools were killed, and A still works with honest tools.
  for (int i = 0; i < 1000 && SleepersWith(mark) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(SleepersWith(mark), 0);
  daemon_->set_guest_tools_wrapper(nullptr);
  Response honest = Post(a, "sync", nlohmann::json::object());
  EXPECT_EQ(honest.status, 200) << honest.body;
  KillSleepers(mark);
}

TEST_F(GuestDeadlineTest, StalledGuestsInSeveralSandboxesStillLeaveWorkersForOthers) {
  // A longer deadline than the other tests: the second wave and B's calls below must all end
  // before the first stuck tool's deadline, also under ASan on a loaded machine.
  Restart(absl::Seconds(6));
  std::vector<std::string> hostile;
  for (int i = 0; i < 4; ++i) {
    hostile.push_back(Create());
  }
  Response plain = Call("POST", "/v1/sandboxes", "{}");
  ASSERT_EQ(plain.status, 201) << plain.body;
  std::string b = plain.Json().value("id", "");
  const std::string mark = absl::StrCat(700000 + ::getpid() % 99999);
  UseTool(WriteStuckTool(tmp_.path(), "manifest", mark));

  std::atomic<int> ended{0};
  constexpr int kStuck = 12;
  std::vector<Response> results(kStuck);
  std::vector<std::thread> stuck;
  auto diff = [&](int i) {
    stuck.emplace_back([&, i] {
      std::unique_ptr<HttpTestClient> c = daemon_->Connect();
      absl::StatusOr<Response> r =
          c->Request("GET", absl::StrCat("/v1/sandboxes/", hostile[i % 4], "/diff"));
      if (r.ok()) {
        results[i] = *r;
      }
      if (results[i].status == 504) {
        ++ended;
      }
    });
  };
  // First wave: one stuck operation in each hostile sandbox (4 of the 6 daemon-wide slots).
  for (int i = 0; i < 4; ++i) {
    diff(i);
  }
  for (int i = 0; i < 1000 && SleepersWith(mark) < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(SleepersWith(mark), 4) << "each hostile sandbox holds its guest tools";
  // Second wave: 4 sandboxes x 2 operations each would be all 8 workers without the
  // daemon-wide cap; two more queue, the rest are refused at once (409 or 429).
  for (int i = 4; i < kStuck; ++i) {
    diff(i);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the second wave arrives

  Response exec = Post(b, "execs", {{"argv", {"echo", "from-b"}}});
  EXPECT_EQ(exec.status, 201) << exec.body;
  EXPECT_EQ(Call("POST", absl::StrCat("/v1/sandboxes/", b, "/stop")).status, 200);
  EXPECT_EQ(Call("DELETE", absl::StrCat("/v1/sandboxes/", b)).status, 204);
  EXPECT_EQ(ended.load(), 0) << "B waited for the hostile sandboxes' stuck guest tools";

  for (std::thread& t : stuck) {
    t.join();
  }
  int timed_out = 0;
  int refused_daemon_wide = 0;
  for (const Response& r : results) {
    EXPECT_TRUE(r.status == 504 || r.status == 409 || r.status == 429) << r.status << r.body;
    if (r.status == 429) {
      EXPECT_THAT(r.body, HasSubstr("the most it runs at once"));
      ++refused_daemon_wide;
    }
    timed_out += r.status == 504 ? 1 : 0;
  }
  // The first wave and the two that queued behind it ran into the deadline; of the other six,
  // at most two found a slot and then their sandbox busy (409), so four or more were refused
  // by the daemon-wide cap.
  EXPECT_EQ(timed_out, 6);
  EXPECT_GE(refused_daemon_wide, 4) << "the daemon-wide cap refused too few of the second wave";
  KillSleepers(mark);
  daemon_->set_guest_tools_wrapper(nullptr);
}

TEST_F(GuestDeadlineTest, AToolThatNeverReadsUnpackFailsTheSyncAndStopDoesNotWaitForIt) {
  std::string a = Create();
  const std::string mark = absl::StrCat(800000 + ::getpid() % 99999);
  UseTool(WriteStuckTool(tmp_.path(), "unpack", mark));
  // More than the protocol's credit window: the writer blocks on a reader that never reads.
  std::string big(16 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) {
    big[i] = static_cast<char>('a' + (i / 4096) % 26);
  }
  WriteAll(host_ / "big.bin", big);
  Response r = Post(a, "sync", nlohmann::json::object());
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_THAT(r.body, HasSubstr("abox-guest ws unpack in sandbox " + a));
  for (int i = 0; i < 1000 && SleepersWith(mark) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(SleepersWith(mark), 0) << "the stuck tool was not killed";

  // A stop while the tool is stuck ends it at once (the VM goes), not at the deadline.
  std::string stopped_body;
  std::thread stuck([&] {
    std::unique_ptr<HttpTestClient> c = daemon_->Connect();
    absl::StatusOr<Response> got =
        c->Request("POST", absl::StrCat("/v1/sandboxes/", a, "/sync"), "{}");
    stopped_body = got.ok() ? got->body : got.status().ToString();
  });
  // Joined however the test ends (a failed ASSERT must report, not terminate on a joinable
  // thread); the stop below ends the request, and so does the sandbox's removal.
  absl::Cleanup join = [&] {
    if (stuck.joinable()) {
      KillSleepers(mark);
      stuck.join();
    }
  };
  for (int i = 0; i < 1000 && SleepersWith(mark) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(SleepersWith(mark), 1) << "the second sync's tool never got stuck";
  EXPECT_EQ(Call("POST", absl::StrCat("/v1/sandboxes/", a, "/stop")).status, 200);
  EXPECT_EQ(Call("DELETE", absl::StrCat("/v1/sandboxes/", a)).status, 204);
  stuck.join();
  // Ended by the stop (the agent went with the VM), not by its deadline.
  EXPECT_THAT(stopped_body, Not(HasSubstr("did not finish within")));
  EXPECT_THAT(stopped_body, HasSubstr("stopped"));
  KillSleepers(mark);
  daemon_->set_guest_tools_wrapper(nullptr);
}

}  // namespace
}  // namespace abox::daemon
