#include "src/api/resource_json.h"

#include "gtest/gtest.h"
#include "src/api/errors.h"

namespace abox::api {
namespace {

TEST(SandboxCreateTest, DefaultsFromEmptyBody) {
  absl::StatusOr<SandboxCreate> c = DecodeSandboxCreate("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->image, "default");
  EXPECT_EQ(c->cpus, 1);
  EXPECT_EQ(c->memory_mib, 512);
  EXPECT_EQ(c->accel, "auto");
}

TEST(SandboxCreateTest, ReadsEveryField) {
  absl::StatusOr<SandboxCreate> c = DecodeSandboxCreate(
      R"({"image":"py","name":"web-1","cpus":2,"memory_mib":1024,"labels":{"app":"x"},)"
      R"("ttl_seconds":60,"idle_timeout_seconds":30,"accel":"tcg"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "web-1");
  EXPECT_EQ(c->cpus, 2);
  EXPECT_EQ(c->labels.at("app"), "x");
  EXPECT_EQ(c->ttl_seconds, 60);
  EXPECT_EQ(c->accel, "tcg");
}

TEST(SandboxCreateTest, BadInputNamesTheField) {
  struct Case {
    const char* body;
    const char* field;
  };
  for (const Case& c :
       {Case{R"({"cpus":"2"})", "cpus"}, Case{R"({"cpus":0})", "cpus"},
        Case{R"({"bogus":1})", "bogus"}, Case{R"({"name":"a b"})", "name"},
        Case{R"({"name":"0123456789ab"})", "name"}, Case{R"({"accel":"xen"})", "accel"},
        Case{R"({"labels":{"a=b":"c"}})", "labels.a=b"},
        Case{R"({"memory_mib":64})", "memory_mib"}}) {
    absl::StatusOr<SandboxCreate> r = DecodeSandboxCreate(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(FieldOf(r.status()).value_or(""), c.field) << c.body << ": " << r.status();
  }
  EXPECT_EQ(DecodeSandboxCreate("{").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeSandboxCreate("[]").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExecCreateTest, ArgvOrShellExactlyOne) {
  EXPECT_TRUE(DecodeExecCreate(R"({"argv":["ls","-l"]})").ok());
  EXPECT_TRUE(DecodeExecCreate(R"({"shell":"echo hi"})").ok());
  EXPECT_EQ(FieldOf(DecodeExecCreate(R"({})").status()).value_or(""), "argv");
  EXPECT_EQ(FieldOf(DecodeExecCreate(R"({"argv":["a"],"shell":"b"})").status()).value_or(""),
            "shell");
  EXPECT_EQ(FieldOf(DecodeExecCreate(R"({"argv":["a"],"user":"bob"})").status()).value_or(""),
            "user");
  EXPECT_EQ(FieldOf(DecodeExecCreate(R"({"argv":["a"],"pty":{"rows":0,"cols":80}})").status())
                .value_or(""),
            "pty.rows");
  EXPECT_EQ(FieldOf(DecodeExecCreate(R"({"argv":["a"],"env":{"A=B":"c"}})").status()).value_or(""),
            "env.A=B");
  absl::StatusOr<ExecCreate> full = DecodeExecCreate(
      R"({"argv":["sh"],"env":{"A":"1"},"cwd":"/tmp","user":"root","timeout_ms":5,)"
      R"("stdin":true,"pty":{"rows":24,"cols":80},"kill_on_disconnect":true})");
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_TRUE(full->stdin_open);
  EXPECT_TRUE(full->kill_on_disconnect);
  ASSERT_TRUE(full->pty.has_value());
  EXPECT_EQ(full->pty->second, 80);
}

TEST(SignalTest, NamesAndNumbers) {
  EXPECT_EQ(*ParseSignal("TERM"), 15);
  EXPECT_EQ(*ParseSignal("sigint"), 2);
  EXPECT_EQ(*ParseSignal("9"), 9);
  EXPECT_FALSE(ParseSignal("NOPE").ok());
  EXPECT_FALSE(ParseSignal("0").ok());
  EXPECT_EQ(*DecodeSignalRequest(R"({"signal":"KILL"})"), 9);
  EXPECT_EQ(*DecodeSignalRequest(R"({"signal":1})"), 1);
  EXPECT_FALSE(DecodeSignalRequest(R"({"signal":99})").ok());
  EXPECT_FALSE(DecodeSignalRequest(R"({"signal":true})").ok());
}

TEST(OutputJsonTest, Utf8AsTextElseBase64) {
  nlohmann::json text = OutputChunkToJson(3, store::ExecStream::kStderr, "héllo\n");
  EXPECT_EQ(text["data"], "héllo\n");
  EXPECT_EQ(text["stream"], "stderr");
  EXPECT_EQ(text["seq"], 3);
  EXPECT_FALSE(text.contains("data_b64"));
  for (std::string bad : {std::string("\xff"), std::string("a\xc3"), std::string("\xc0\x80"),
                          std::string("\xed\xa0\x80")}) {
    nlohmann::json bin = OutputChunkToJson(1, store::ExecStream::kStdout, bad);
    EXPECT_FALSE(bin.contains("data"));
    EXPECT_TRUE(bin.contains("data_b64"));
  }
  EXPECT_EQ(
      OutputChunkToJson(1, store::ExecStream::kStdout, std::string("\xff\x00", 2))["data_b64"],
      "/wA=");
}

TEST(SandboxJsonTest, ExpiresAtIsTheEarlierOfTtlAndIdle) {
  store::SandboxRecord r;
  r.id = "0123456789ab";
  r.state = store::SandboxState::kReady;
  r.created_at = absl::FromUnixSeconds(1000);
  r.last_active_at = absl::FromUnixSeconds(1500);
  r.ttl_seconds = 600;
  r.idle_timeout_seconds = 60;
  nlohmann::json j = SandboxToJson(r);
  EXPECT_EQ(j["expires_at"], FormatApiTime(absl::FromUnixSeconds(1560)));
  EXPECT_EQ(j["state"], "ready");
  // While a command runs the idle timeout does not count.
  j = SandboxToJson(r, {.running_execs = 1});
  EXPECT_EQ(j["expires_at"], FormatApiTime(absl::FromUnixSeconds(1600)));
  r.state = store::SandboxState::kStopped;
  EXPECT_FALSE(SandboxToJson(r).contains("expires_at"));
}

}  // namespace
}  // namespace abox::api
