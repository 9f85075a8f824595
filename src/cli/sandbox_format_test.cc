#include "src/cli/sandbox_format.h"

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"

namespace abox::cli {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// The API's JSON as the CLI gets it: decoded by the api codecs.
std::vector<api::Sandbox> Sandboxes(const json& list) {
  absl::StatusOr<std::vector<api::Sandbox>> s = api::DecodeSandboxList({{"sandboxes", list}});
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::vector<api::Sandbox>{};
}
api::Exec Exec(const json& j) {
  absl::StatusOr<api::Exec> e = api::DecodeExec(j);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : api::Exec{};
}
api::Event Event(const json& j) {
  absl::StatusOr<api::Event> e = api::DecodeEvent(j);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : api::Event{};
}

absl::Time At(const char* rfc3339) {
  absl::Time t;
  std::string err;
  EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &err)) << err;
  return t;
}

TEST(SandboxTableTest, AlignedColumnsAgesExpiryAndLabels) {
  json sandboxes = json::array({
      {{"id", "3fa9c1b2d4e5f60718293a4b"},
       {"name", "web"},
       {"image", "default"},
       {"state", "ready"},
       {"cpus", 2},
       {"memory_mib", 1536},
       {"disk_mib", 16384},
       {"disk_used_bytes", 328204288},
       {"labels", {{"team", "a"}, {"app", "web"}}},
       {"created_at", "2026-11-30T10:00:00.000Z"},
       {"expires_at", "2026-11-30T14:00:00Z"}},
      {{"id", "9e8d7c6b5a49"},
       {"name", "old"},
       {"image", "default"},
       {"state", "stopped"},
       {"cpus", 1},
       {"memory_mib", 512},
       {"disk_mib", 16384},
       {"labels", json::object()},
       {"created_at", "2026-11-28T12:00:00Z"},
       {"expires_at", "2026-11-28T13:00:00Z"}},
  });
  EXPECT_EQ(SandboxTable(Sandboxes(sandboxes), At("2026-11-30T12:00:00Z")),
            "ID            NAME  IMAGE    STATE    CPUS  MEM      DISK              AGE  EXPIRES  "
            "LABELS\n"
            "3fa9c1b2d4e5  web   default  ready    2     1.5 GiB  313.0 MiB/16 GiB  2h   in 2h    "
            "app=web,team=a\n"
            "9e8d7c6b5a49  old   default  stopped  1     512 MiB  16 GiB            2d   -        "
            "-\n");
}

TEST(SandboxTableTest, MissingFieldsShowAsDashesMistypedOnesAreNamed) {
  std::string table = SandboxTable(Sandboxes(json::array({json::object()})), absl::Now());
  EXPECT_THAT(table, HasSubstr("\n-   -     -      -      -     -    -     -    -        -\n"));
  // A mistyped field is not shown as a blank: the answer is refused, naming it.
  absl::StatusOr<std::vector<api::Sandbox>> mistyped =
      api::DecodeSandboxList({{"sandboxes", json::array({{{"id", 7}, {"cpus", "two"}}})}});
  ASSERT_FALSE(mistyped.ok());
  EXPECT_EQ(api::FieldOf(mistyped.status()).value_or(""), "sandboxes[0].id");
}

TEST(FormatMibTest, MibOrGib) {
  EXPECT_EQ(FormatMib(512), "512 MiB");
  EXPECT_EQ(FormatMib(2048), "2 GiB");
  EXPECT_EQ(FormatMib(1536), "1.5 GiB");
}

TEST(OutputBytesTest, TextOrBase64) {
  EXPECT_EQ(api::DecodeOutputChunk(json{{"data", "hi\n"}})->data, "hi\n");
  EXPECT_EQ(api::DecodeOutputChunk(json{{"data_b64", "/wA="}})->data, std::string("\xff\0", 2));
  // Base64 that does not decode is refused, naming the field (it used to show as nothing).
  EXPECT_EQ(api::FieldOf(api::DecodeOutputChunk(json{{"data_b64", "!!"}}).status()).value_or(""),
            "data_b64");
}

TEST(ExecHeaderTest, SaysWhatRanWhenAndHowItEnded) {
  EXPECT_EQ(ExecHeader(Exec(json{{"id", "4be1c2d3e4f5a6b7"},
                                 {"argv", {"sh", "-c", "make test"}},
                                 {"state", "exited"},
                                 {"exit_code", 2},
                                 {"started_at", "2026-11-30T16:05:31.000Z"},
                                 {"finished_at", "2026-11-30T16:05:32.250Z"}})),
            "==> exec 4be1c2d3e4f5 at 2026-11-30 16:05:31 UTC: sh -c 'make test' -> exited 2 "
            "(1.2s)");
  EXPECT_THAT(ExecHeader(Exec(json{
                  {"shell", "sleep 9"}, {"state", "exited"}, {"signal", 9}, {"timed_out", true}})),
              HasSubstr("sh -c 'sleep 9' -> timed out"));
  EXPECT_THAT(ExecHeader(Exec(json{{"argv", {"x"}}, {"state", "exited"}, {"signal", 15}})),
              HasSubstr("-> killed by SIGTERM"));
  EXPECT_THAT(ExecHeader(Exec(json{
                  {"argv", {"frob"}}, {"state", "failed"}, {"error", "frob: command not found"}})),
              HasSubstr("-> failed: frob: command not found"));
  EXPECT_THAT(ExecHeader(Exec(json{{"argv", {"top"}}, {"state", "running"}})),
              HasSubstr("-> running"));
}

TEST(ExecHeaderTest, SaysWhenTheOomKillerStruck) {
  EXPECT_THAT(
      ExecHeader(Exec(json{
          {"argv", {"tail", "/dev/zero"}}, {"state", "exited"}, {"signal", 9}, {"oom_kills", 1}})),
      HasSubstr("-> killed by SIGKILL, out of memory [OOM killer: 1 process]"));
  EXPECT_THAT(ExecHeader(Exec(json{
                  {"argv", {"make"}}, {"state", "exited"}, {"exit_code", 2}, {"oom_kills", 3}})),
              HasSubstr("-> exited 2 [OOM killer: 3 processes]"));
}

TEST(EventLineTest, TimeTypeSandboxAndSummary) {
  EXPECT_EQ(
      EventLine(Event(json{{"seq", 12},
                           {"time", "2026-11-30T16:05:31.123Z"},
                           {"type", "exec_finished"},
                           {"sandbox_id", "3fa9c1b2d4e5f607"},
                           {"payload", {{"exec_id", "e1"}, {"exit_code", 0}, {"note", "a b"}}}})),
      "2026-11-30T16:05:31Z  exec_finished  3fa9c1b2d4e5  exec_id=e1 exit_code=0 "
      "note=\"a b\"");
  EXPECT_EQ(EventLine(Event(json{{"time", "2026-11-30T16:05:31Z"},
                                 {"type", "ready"},
                                 {"sandbox_id", "3fa9c1"},
                                 {"payload", json::object()}})),
            "2026-11-30T16:05:31Z  ready          3fa9c1");  // no trailing blanks
  std::string long_line =
      EventLine(Event(json{{"type", "failed"}, {"payload", {{"reason", std::string(300, 'x')}}}}));
  EXPECT_THAT(long_line, HasSubstr("-                     failed         -             reason="));
  EXPECT_LT(long_line.size(), 200u);
  EXPECT_THAT(long_line, HasSubstr("..."));
}

TEST(DaemonStatusTextTest, PidUptimeVersionAndLedger) {
  json health = {{"status", "ok"},
                 {"pid", 4242},
                 {"uptime_seconds", 3723.6},
                 {"sandboxes", 2},
                 {"accel", "kvm"},
                 {"ledger",
                  {{"cpus_used", 3},
                   {"cpus_budget", 8},
                   {"memory_mib_used", 1536},
                   {"memory_mib_budget", 16384}}}};
  json version = {{"version", "0.1.0"}, {"api", "1"}, {"protocol", 3}};
  EXPECT_EQ(DaemonStatusText(*api::DecodeHealth(health), *api::DecodeVersion(version),
                             "/run/user/1/abox/aboxd.sock"),
            "aboxd      running, pid 4242, up 1h2m3s\n"
            "socket     /run/user/1/abox/aboxd.sock\n"
            "version    0.1.0 (API 1, guest protocol 3)\n"
            "sandboxes  2 running\n"
            "accel      kvm\n"
            "vCPUs      3 of 8 in use\n"
            "memory     1.5 GiB of 16 GiB in use\n");
}

TEST(DaemonStatusTextTest, WarmPoolShapesAndTheirLastError) {
  json health = {
      {"status", "ok"},
      {"pool",
       {{"size", 2},
        {"handed_out", 5},
        {"made", 7},
        {"drained", 0},
        {"memory_low", true},
        {"shapes",
         {{{"image", "default"}, {"cpus", 1}, {"memory_mib", 512}, {"idle", 1}, {"filling", true}},
          {{"image", "node"},
           {"cpus", 2},
           {"memory_mib", 2048},
           {"idle", 0},
           {"filling", false},
           {"last_error", "image node not found"}}}}}}};
  json version = {{"version", "0.1.0"}, {"api", "1"}, {"protocol", 3}};
  absl::StatusOr<api::Health> decoded = api::DecodeHealth(health);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_TRUE(decoded->pool.has_value());
  EXPECT_EQ(api::ToJson(*decoded)["pool"], health["pool"]);  // round trip
  std::string text = DaemonStatusText(*decoded, *api::DecodeVersion(version), "/s");
  EXPECT_NE(text.find("pool       2 idle VM(s) kept per image and size; 5 handed out; the host "
                      "is short of memory: draining\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("             default, 1 vCPU, 512 MiB: 1 idle, 1 starting\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("             node, 2 vCPU, 2 GiB: 0 idle; last fill failed: image node "
                      "not found\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace abox::cli
