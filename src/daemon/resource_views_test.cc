#include "src/daemon/resource_views.h"

#include "gtest/gtest.h"
#include "src/api/wire.h"

namespace abox::daemon {
namespace {

using api::FormatApiTime;

TEST(SandboxJsonTest, ExpiresAtIsTheEarlierOfTtlAndIdle) {
  store::SandboxRecord r;
  r.id = "0123456789ab";
  r.state = store::SandboxState::kReady;
  r.created_at = absl::FromUnixSeconds(1000);
  r.last_active_at = absl::FromUnixSeconds(1500);
  r.ttl_seconds = 600;
  r.idle_timeout_seconds = 60;
  nlohmann::json j = SandboxJson(r);
  EXPECT_EQ(j["expires_at"], FormatApiTime(absl::FromUnixSeconds(1560)));
  EXPECT_EQ(j["state"], "ready");
  // While a command runs the idle timeout does not count.
  j = SandboxJson(r, {.running_execs = 1});
  EXPECT_EQ(j["expires_at"], FormatApiTime(absl::FromUnixSeconds(1600)));
  r.state = store::SandboxState::kStopped;
  EXPECT_FALSE(SandboxJson(r).contains("expires_at"));
}

TEST(SandboxJsonTest, TheWholeObjectOfARecord) {
  store::SandboxRecord r;
  r.id = "0123456789ab";
  r.name = "web";
  r.image = "default";
  r.cpus = 2;
  r.memory_mib = 1024;
  r.disk_mib = 16384;
  r.labels = {{"app", "web"}};
  r.state = store::SandboxState::kFailed;
  r.failure = "no kvm";
  r.run_dir = "/not/on/the/wire";
  r.created_at = absl::FromUnixSeconds(1000);
  r.ready_at = absl::FromUnixSeconds(1001);
  r.last_active_at = absl::FromUnixSeconds(1002);
  r.vmm_pid = 77;
  r.accel = "tcg";
  api::SandboxLive live{.running_execs = 0,
                        .workspace = {{"path", "/w"}, {"guest_path", "/workspace"}},
                        .egress_mode = "open",
                        .disk_used_bytes = 4096};
  EXPECT_EQ(api::Dump(SandboxJson(r, live)),
            R"({"accel":"tcg","cpus":2,"created_at":"1970-01-01T00:16:40.000Z",)"
            R"("disk_mib":16384,"disk_used_bytes":4096,)"
            R"("egress":{"mode":"open"},"failure":"no kvm","id":"0123456789ab",)"
            R"("idle_timeout_seconds":0,"image":"default","labels":{"app":"web"},)"
            R"("last_active_at":"1970-01-01T00:16:42.000Z","memory_mib":1024,"name":"web",)"
            R"("ready_at":"1970-01-01T00:16:41.000Z","running_execs":0,"state":"failed",)"
            R"("ttl_seconds":0,"vmm_pid":77,"workspace":{"guest_path":"/workspace","path":"/w"}})");
}

TEST(ExecJsonTest, RunningAndEndedExecs) {
  store::ExecRecord e;
  e.id = "e1";
  e.sandbox_id = "0123456789ab";
  e.shell = "sleep 1";
  e.started_at = absl::FromUnixSeconds(1000);
  e.result.error = "not sent while running";
  EXPECT_EQ(api::Dump(ExecJson(e)),
            R"({"cwd":"","env":{},"id":"e1","output_bytes":0,"output_truncated":false,)"
            R"("pty":false,"sandbox_id":"0123456789ab","shell":"sleep 1",)"
            R"("started_at":"1970-01-01T00:16:40.000Z","state":"running","timeout_ms":0,)"
            R"("user":"agent"})");
  e.state = store::ExecState::kExited;
  e.result = {.state = store::ExecState::kExited, .signal = 9, .timed_out = true, .oom_kills = 4};
  e.finished_at = absl::FromUnixSeconds(1001);
  e.argv = {"sleep", "9"};
  e.user = "root";
  nlohmann::json ended = ExecJson(
      store::ExecWithOutput{e, {{.seq = 1, .stream = store::ExecStream::kStderr, .data = "x"}}});
  EXPECT_EQ(ended["signal"], 9);
  EXPECT_EQ(ended["timed_out"], true);
  EXPECT_EQ(ended["oom_kills"], 4);
  EXPECT_FALSE(ended.contains("exit_code"));
  EXPECT_FALSE(ended.contains("error"));
  EXPECT_FALSE(ended.contains("shell"));
  EXPECT_EQ(ended["user"], "root");
  EXPECT_EQ(ended["finished_at"], "1970-01-01T00:16:41.000Z");
  EXPECT_EQ(ended["output"], nlohmann::json::parse(R"([{"seq":1,"stream":"stderr","data":"x"}])"));
  EXPECT_EQ(api::Dump(ExitLineJson(e)), api::Dump({{"type", "exit"}, {"exec", ExecJson(e)}}));
}

TEST(OutputLineJsonTest, ChunkWithItsType) {
  EXPECT_EQ(api::Dump(OutputLineJson(3, store::ExecStream::kStdout, "hi\n")),
            R"({"data":"hi\n","seq":3,"stream":"stdout","type":"output"})");
  EXPECT_EQ(api::Dump(OutputLineJson(4, store::ExecStream::kStderr, std::string("\xff\x00", 2))),
            R"({"data_b64":"/wA=","seq":4,"stream":"stderr","type":"output"})");
}

TEST(EventJsonTest, SandboxIdOnlyWhenThereIsOne) {
  store::Event e{.seq = 5,
                 .time = absl::FromUnixSeconds(1000),
                 .sandbox_id = "0123456789ab",
                 .type = "ready",
                 .payload = {{"k", "v"}}};
  EXPECT_EQ(api::Dump(EventJson(e)), R"({"payload":{"k":"v"},"sandbox_id":"0123456789ab","seq":5,)"
                                     R"("time":"1970-01-01T00:16:40.000Z","type":"ready"})");
  e.sandbox_id.clear();
  EXPECT_FALSE(EventJson(e).contains("sandbox_id"));
}

}  // namespace
}  // namespace abox::daemon
