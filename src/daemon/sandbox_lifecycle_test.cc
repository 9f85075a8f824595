// The redesigned lifecycle through the real daemon over the fake VMM: a failure injected at
// each create step leaves nothing behind; a create stuck in setup holds no worker another
// sandbox needs; TTL and idle timeouts run on a fake clock.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/clock.h"
#include "src/daemon/testing/daemon_test_base.h"
#include "src/workspace/run_copies.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon {
namespace {

namespace fs = std::filesystem;
using http::httptest::HttpTestClient;
using http::httptest::Response;
using http::httptest::TempDir;
using ::testing::HasSubstr;

class SandboxLifecycleTest : public testing::DaemonTestBase {
 protected:
  void StartDaemon(Budget budget = {8, 32768}, int pool = 0) {
    daemon_ = std::make_unique<testing::TestDaemon>(home_.path(), budget);
    daemon_->set_clock(&clock_);
    daemon_->set_pool({.size = pool, .check_interval = absl::Milliseconds(10)});
    daemon_->Start();
    client_ = daemon_->Connect();
    ASSERT_NE(client_, nullptr);
  }
  void TearDown() override {
    client_.reset();
    daemon_.reset();
    (void)abox::testing::FakeVmm::KillAll();
  }
  Response Call(absl::string_view method, absl::string_view target, absl::string_view body = "") {
    daemon_->ReconnectIfClosed(client_);
    absl::StatusOr<Response> r = client_->Request(method, target, body);
    EXPECT_TRUE(r.ok()) << method << " " << target << ": " << r.status();
    return r.ok() ? *r : Response{};
  }
  // A host repo and a guest dir (the fake VM's guest is this host) for a workspace.
  nlohmann::json WorkspaceSpec(const std::string& name) {
    fs::path host = fs::path(tmp_.path()) / (name + "-repo");
    fs::path guest = fs::path(tmp_.path()) / (name + "-guest");
    fs::create_directories(host);
    fs::create_directories(guest);
    std::ofstream(host / "main.c") << "int main(void) { return 0; }\n";
    return {{"path", host.string()}, {"guest_path", guest.string()}};
  }
  std::vector<nlohmann::json> Sandboxes() {
    Response r = Call("GET", "/v1/sandboxes");
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<nlohmann::json> out;
    nlohmann::json body = r.Json();
    for (const nlohmann::json& s : body["sandboxes"]) {
      out.push_back(s);
    }
    return out;
  }
  // Files under $ABOX_HOME/<dir> (sandboxes/, workspaces/).
  int FilesUnder(const std::string& dir) {
    fs::path p = fs::path(home_.path()) / dir;
    if (!fs::exists(p)) {
      return 0;
    }
    return static_cast<int>(std::distance(fs::directory_iterator(p), fs::directory_iterator()));
  }

  base::FakeClock clock_;
  TempDir home_;
  TempDir tmp_;
};

TEST_F(SandboxLifecycleTest, AFailureAtEachCreateStepLeavesNothingBehind) {
  StartDaemon();
  const std::vector<std::string> steps = SandboxService::CreateStepNames();
  Response secret =
      Call("POST", "/v1/secrets",
           R"({"spec": {"name": "T", "hosts": ["api.example.com"]}, "value": "value-0123456789"})");
  ASSERT_EQ(secret.status, 201) << secret.body;
  bool past_announce = false;
  for (const std::string& step : steps) {
    SCOPED_TRACE(step);
    daemon_->set_create_injector([step](absl::string_view name) {
      return name == step ? absl::UnavailableError(absl::StrCat("injected at ", step))
                          : absl::OkStatus();
    });
    // Every step is in this create: a workspace, an egress policy, a secret and a setup command.
    nlohmann::json body = {{"workspace", WorkspaceSpec(step)},
                           {"egress", {{"mode", "allowlist"}, {"allow", {"example.com:443"}}}},
                           {"secrets", {{"T", ""}}},
                           {"setup", {{"commands", {"true"}}}}};
    Response r = Call("POST", "/v1/sandboxes", body.dump());
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_THAT(r.body, HasSubstr("injected at " + step));

    // Nothing runs or is reserved, whichever step failed.
    EXPECT_EQ(daemon_->ledger().Usage().cpus, 0);
    EXPECT_EQ(daemon_->ledger().Usage().memory_mib, 0);
    EXPECT_EQ(daemon_->daemon().sandboxes().RunningCount(), 0) << "a live entry leaked";
    EXPECT_EQ(daemon_->egress().running(), 0u) << "a proxy leaked";
    EXPECT_TRUE(abox::testing::FakeVmm::LiveVms().empty()) << "a VM leaked";
    EXPECT_EQ(FilesUnder("sandboxes"), 0) << "a run dir leaked";

    std::vector<nlohmann::json> listed = Sandboxes();
    past_announce = past_announce || step == "start-egress";
    if (!past_announce) {
      // Refused at admission: not even a record; the 4xx/5xx is all there is.
      EXPECT_TRUE(listed.empty()) << listed.size();
      EXPECT_EQ(FilesUnder("workspaces"), 0) << "a workspace state leaked";
      continue;
    }
    // Past admission the client was told the sandbox exists: it stays, failed, with the reason
    // (and its workspace state, as any failed sandbox), until rm.
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0]["state"], "failed");
    EXPECT_THAT(listed[0].value("failure", ""), HasSubstr("injected at " + step));
    std::string id = listed[0].value("id", "");
    EXPECT_EQ(Call("DELETE", "/v1/sandboxes/" + id).status, 204);
    EXPECT_TRUE(Sandboxes().empty());
    EXPECT_EQ(FilesUnder("workspaces"), 0) << "rm left the workspace state";
  }
  EXPECT_TRUE(past_announce);
  daemon_->set_create_injector(nullptr);
  Response ok = Call("POST", "/v1/sandboxes", "{}");
  EXPECT_EQ(ok.status, 201) << ok.body;
}

// The same with a warm pool: every create takes the pooled VM first. A create that fails at
// any step destroys that VM (it is never handed out again), releases its reservation and leaves
// nothing else behind; the pool refills with a new VM.
TEST_F(SandboxLifecycleTest, WithAWarmPoolAFailedCreateDestroysThePooledVmItTook) {
  StartDaemon({8, 8192}, /*pool=*/1);
  WarmPool* pool = daemon_->daemon().pool();
  ASSERT_NE(pool, nullptr);
  Response secret =
      Call("POST", "/v1/secrets",
           R"({"spec": {"name": "T", "hosts": ["api.example.com"]}, "value": "value-0123456789"})");
  ASSERT_EQ(secret.status, 201) << secret.body;
  auto idle = [&] {
    PoolStatus s = pool->Status();
    return s.shapes.empty() ? 0 : s.shapes[0].idle;
  };
  auto wait_idle = [&] {
    for (int i = 0; i < 2000 && idle() != 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(idle(), 1);
  };
  auto live_ids = [] {
    std::vector<std::string> ids;
    for (const abox::testing::FakeVmInfo& vm : abox::testing::FakeVmm::LiveVms()) {
      ids.push_back(vm.id);
    }
    return ids;
  };
  for (const std::string& step : SandboxService::CreateStepNames()) {
    SCOPED_TRACE(step);
    wait_idle();
    std::vector<std::string> pooled = live_ids();
    ASSERT_EQ(pooled.size(), 1u);
    daemon_->set_create_injector([step](absl::string_view name) {
      return name == step ? absl::UnavailableError(absl::StrCat("injected at ", step))
                          : absl::OkStatus();
    });
    nlohmann::json body = {{"workspace", WorkspaceSpec(step)},
                           {"egress", {{"mode", "allowlist"}, {"allow", {"example.com:443"}}}},
                           {"secrets", {{"T", ""}}},
                           {"setup", {{"commands", {"true"}}}}};
    Response r = Call("POST", "/v1/sandboxes", body.dump());
    EXPECT_EQ(r.status, 503) << r.body;
    // The create had taken the pooled VM (its id is the sandbox's) and destroyed it.
    EXPECT_THAT(r.body, HasSubstr("injected at " + step));
    std::vector<std::string> now = live_ids();
    EXPECT_TRUE(std::find(now.begin(), now.end(), pooled[0]) == now.end())
        << "the VM of the failed create lives on";
    EXPECT_FALSE(fs::exists(fs::path(home_.path()) / "pool" / pooled[0])) << "its marker leaked";
    // What is reserved is the pool's alone (a refill may be on its way).
    wait_idle();
    EXPECT_EQ(daemon_->ledger().Usage().memory_mib, api::kDefaultMemoryMib);
    EXPECT_EQ(daemon_->daemon().sandboxes().RunningCount(), 0);
    EXPECT_EQ(daemon_->egress().running(), 0u);
    for (const nlohmann::json& s : Sandboxes()) {
      EXPECT_EQ(s["state"], "failed");
      EXPECT_EQ(Call("DELETE", "/v1/sandboxes/" + s.value("id", "")).status, 204);
    }
  }
  daemon_->set_create_injector(nullptr);
  wait_idle();
  std::vector<std::string> pooled = live_ids();
  ASSERT_EQ(pooled.size(), 1u);
  Response ok = Call("POST", "/v1/sandboxes", "{}");
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(ok.Json()["id"], pooled[0]);  // the pooled VM became the sandbox
  PoolStatus status = pool->Status();
  EXPECT_GE(status.handed_out, static_cast<int64_t>(SandboxService::CreateStepNames().size()));
  // The daemon's stop destroys the idle pooled VMs (they are nobody's) and keeps the sandbox.
  wait_idle();
  daemon_->Shutdown();
  std::vector<std::string> left = live_ids();
  EXPECT_EQ(left, std::vector<std::string>{pooled[0]});
  EXPECT_TRUE(fs::is_empty(fs::path(home_.path()) / "pool"));
}

TEST_F(SandboxLifecycleTest, CreatesStuckInSetupHoldNoWorkerThatOtherSandboxesNeed) {
  StartDaemon({32, 32768});
  nlohmann::json with_workspace = {{"workspace", WorkspaceSpec("b")}};
  Response b = Call("POST", "/v1/sandboxes", with_workspace.dump());
  ASSERT_EQ(b.status, 201) << b.body;
  const std::string id = b.Json().value("id", "");

  // More creates stuck in setup than the server has blocking workers (8).
  constexpr int kStuck = 10;
  std::vector<std::thread> stuck;
  std::vector<Response> outcomes(kStuck);
  for (int i = 0; i < kStuck; ++i) {
    stuck.emplace_back([&, i] {
      std::unique_ptr<HttpTestClient> c = daemon_->Connect();
      nlohmann::json body = {{"setup", {{"commands", {"sleep 600"}}}}};
      absl::StatusOr<Response> r = c->Request("POST", "/v1/sandboxes", body.dump());
      if (r.ok()) {
        outcomes[i] = *r;
      }
    });
  }
  auto in_setup = [&] {
    int n = 0;
    for (const nlohmann::json& s : Sandboxes()) {
      n += s["state"] == "creating" ? 1 : 0;
    }
    return n;
  };
  for (int i = 0; i < 1000 && in_setup() < kStuck; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(in_setup(), kStuck);

  // B's exec, diff and stop complete meanwhile (on their own thread, so a hang fails the test
  // instead of stalling it).
  auto others = std::async(std::launch::async, [&] {
    std::unique_ptr<HttpTestClient> c = daemon_->Connect();
    std::vector<int> codes;
    for (auto [method, target, body] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {"POST", "/v1/sandboxes/" + id + "/execs", R"({"argv":["true"]})"},
             {"GET", "/v1/sandboxes/" + id + "/diff", ""},
             {"POST", "/v1/sandboxes/" + id + "/stop", ""}}) {
      absl::StatusOr<Response> r = c->Request(method, target, body);
      codes.push_back(r.ok() ? r->status : -1);
    }
    return codes;
  });
  ASSERT_EQ(others.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "another sandbox's exec, diff or stop waited for the stuck creates";
  EXPECT_EQ(others.get(), (std::vector<int>{201, 200, 200}));
  EXPECT_EQ(in_setup(), kStuck) << "the stuck creates ended early";

  // A shutdown ends the creates in flight: each waiting client hears that it failed, and the
  // sandboxes are left failed, saying why.
  daemon_->Shutdown();
  for (std::thread& t : stuck) {
    t.join();
  }
  for (const Response& r : outcomes) {
    EXPECT_GE(r.status, 400) << r.body;
    EXPECT_THAT(r.body, HasSubstr("failed during setup"));
    EXPECT_THAT(r.body, HasSubstr("aboxd stopped while the sandbox was booting"));
  }
  daemon_->Start();
  client_ = daemon_->Connect();
  int failed = 0;
  for (const nlohmann::json& s : Sandboxes()) {
    if (s["state"] == "failed") {
      ++failed;
      EXPECT_THAT(s.value("failure", ""), HasSubstr("aboxd stopped while the sandbox was booting"));
    }
  }
  EXPECT_EQ(failed, kStuck);
  EXPECT_EQ(daemon_->ledger().Usage().cpus, 0);
}

TEST_F(SandboxLifecycleTest, TtlAndIdleTimeoutsStopSandboxesOnTheInjectedClock) {
  StartDaemon();
  auto create = [&](const std::string& body) {
    Response r = Call("POST", "/v1/sandboxes", body);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", "");
  };
  std::string ttl = create(R"({"ttl_seconds":60})");
  std::string idle = create(R"({"idle_timeout_seconds":30})");
  std::string busy = create(R"({"idle_timeout_seconds":30})");
  Response exec = Call("POST", "/v1/sandboxes/" + busy + "/execs", R"({"argv":["sleep","600"]})");
  ASSERT_EQ(exec.status, 201) << exec.body;
  auto state = [&](const std::string& id) {
    return Call("GET", "/v1/sandboxes/" + id).Json().value("state", "");
  };

  clock_.Advance(absl::Seconds(29));
  daemon_->daemon().reaper().ReapNow();
  EXPECT_EQ(state(idle), "ready") << "stopped before its idle timeout";
  clock_.Advance(absl::Seconds(2));
  daemon_->daemon().reaper().ReapNow();
  EXPECT_EQ(state(idle), "stopped");
  EXPECT_EQ(state(ttl), "ready");
  EXPECT_EQ(state(busy), "ready") << "a sandbox running a command is not idle";
  // The reaper's own schedule (every reap_interval) finds the TTL without being asked.
  clock_.Advance(absl::Seconds(30));
  for (int i = 0; i < 500 && state(ttl) != "stopped"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(state(ttl), "stopped");
  EXPECT_EQ(state(busy), "ready");

  std::unique_ptr<HttpTestClient> events = daemon_->Connect();
  ASSERT_TRUE(events->Send("GET", "/v1/events?since=0&sandbox=" + ttl, "").ok());
  ASSERT_TRUE(events->ReadHeader().ok());
  absl::StatusOr<std::string> seen = events->ReadUntil("event: stopped");
  ASSERT_TRUE(seen.ok()) << seen.status();
  absl::StatusOr<std::string> rest = events->ReadUntil("\n\n");
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_THAT(*rest, HasSubstr("its TTL of 60s passed"));
  EXPECT_THAT(*rest, HasSubstr("\"expiry\":\"ttl\""));
}

TEST_F(SandboxLifecycleTest, AStartRemovesTheWorkspaceCopiesOfKilledRunsButNotOfLiveOnes) {
  // Two copies `abox run -w` left: one whose run was killed (its lock is free) and one whose
  // run is alive (this test holds its lock).
  fs::path tmp = fs::path(home_.path()) / "tmp";
  fs::create_directories(tmp / "run-workspace-killed");
  fs::create_directories(tmp / "run-workspace-alive");
  std::ofstream(tmp / "run-workspace-killed" / "main.c") << "the user's source";
  std::ofstream(tmp / "run-workspace-alive" / "main.c") << "the user's source";
  std::ofstream(tmp / "run-workspace-killed.lock") << "";
  absl::StatusOr<base::UniqueFd> held =
      workspace::LockRunCopy((tmp / "run-workspace-alive.lock").string(), /*wait=*/false);
  ASSERT_TRUE(held.ok()) << held.status();
  StartDaemon();
  EXPECT_FALSE(fs::exists(tmp / "run-workspace-killed"));
  EXPECT_FALSE(fs::exists(tmp / "run-workspace-killed.lock"));
  EXPECT_TRUE(fs::exists(tmp / "run-workspace-alive" / "main.c"));
  EXPECT_EQ(daemon_->daemon().recorder().noted_failures(), 0);
}

}  // namespace
}  // namespace abox::daemon
