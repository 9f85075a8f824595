#include "src/api/sandbox.h"

#include "gtest/gtest.h"
#include "src/api/errors.h"
#include "src/api/wire.h"

namespace abox::api {
namespace {

TEST(SandboxCreateTest, DefaultsFromEmptyBody) {
  absl::StatusOr<SandboxCreate> c = DecodeSandboxCreate("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->image, "default");
  EXPECT_EQ(c->cpus, 1);
  EXPECT_EQ(c->memory_mib, 2048);
  EXPECT_EQ(c->disk_mib, 16384);
  EXPECT_EQ(c->accel, "auto");
}

TEST(SandboxCreateTest, SetupMayHaveRootCommandsAndNeedsOneCommand) {
  absl::StatusOr<SandboxCreate> c =
      DecodeSandboxCreate(R"({"setup": {"root_commands": ["apt-get update"]}})");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->setup.has_value());
  EXPECT_EQ(c->setup->root_commands, std::vector<std::string>{"apt-get update"});
  EXPECT_TRUE(c->setup->commands.empty());
  absl::StatusOr<SandboxCreate> back = DecodeSandboxCreate(ToJson(*c).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *c);
  absl::StatusOr<SandboxCreate> none = DecodeSandboxCreate(R"({"setup": {"allow": ["npm"]}})");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("at least one command"), std::string::npos);
  absl::StatusOr<SandboxCreate> blank =
      DecodeSandboxCreate(R"({"setup": {"root_commands": ["  "]}})");
  ASSERT_FALSE(blank.ok());
  EXPECT_EQ(blank.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(blank.status().message().find("a setup command is empty"), std::string::npos);
}

TEST(SandboxCreateTest, DiskSizeIsBounded) {
  absl::StatusOr<SandboxCreate> c = DecodeSandboxCreate(R"({"disk_mib": 32768})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->disk_mib, 32768);
  EXPECT_EQ(ToJson(*c)["disk_mib"], 32768);
  for (const char* bad :
       {R"({"disk_mib": 512})", R"({"disk_mib": 2000000})", R"({"disk_mib": "16G"})"}) {
    absl::StatusOr<SandboxCreate> r = DecodeSandboxCreate(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("disk_mib"), std::string::npos) << r.status();
  }
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

TEST(SandboxCreateTest, DefaultRequestIsAnEmptyObject) {
  EXPECT_EQ(Dump(ToJson(SandboxCreate{})), "{}");
}

TEST(SandboxCreateTest, EncodeThenDecodeGivesTheSameRequest) {
  SandboxCreate c;
  c.image = "py";
  c.name = "web-1";
  c.cpus = 4;
  c.memory_mib = 2048;
  c.labels = {{"app", "web"}, {"team", "a"}};
  c.ttl_seconds = 3600;
  c.idle_timeout_seconds = 60;
  c.accel = "kvm";
  c.workspace = WorkspaceSpec{.path = "/home/u/src",
                              .guest_path = "/src",
                              .exclude = {"*.log"},
                              .include = {"*.pem"},
                              .git_history = true};
  c.egress = EgressSpec{.mode = "allowlist", .allow = {"pypi.org", "preset:github"}};
  c.setup = SetupSpec{.commands = {"npm ci"}, .allow = {"preset:npm"}, .timeout_seconds = 300};
  absl::StatusOr<SandboxCreate> back = DecodeSandboxCreate(Dump(ToJson(c)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
  // The defaults of the nested objects too.
  c.workspace = WorkspaceSpec{.path = "/w"};
  c.egress = EgressSpec{};
  c.setup = SetupSpec{.commands = {"true"}};
  back = DecodeSandboxCreate(Dump(ToJson(c)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
}

Sandbox FullSandbox() {
  Sandbox s;
  s.id = "0123456789ab";
  s.name = "web";
  s.image = "default";
  s.cpus = 2;
  s.memory_mib = 1024;
  s.labels = {{"app", "web"}};
  s.state = "ready";
  s.failure = "";
  s.created_at = absl::FromUnixMillis(1000123);
  s.ready_at = absl::FromUnixMillis(1002000);
  s.last_active_at = absl::FromUnixMillis(1500000);
  s.expires_at = absl::FromUnixMillis(1560000);
  s.ttl_seconds = 600;
  s.idle_timeout_seconds = 60;
  s.accel = "kvm";
  s.vmm_pid = 4242;
  s.running_execs = 1;
  s.workspace = {{"path", "/w"}, {"guest_path", "/workspace"}, {"syncs", 3}};
  s.egress_mode = "allowlist";
  s.dropped = SandboxDropped{.queue = 50, .connections = 2, .dns = 3, .events = 4};
  return s;
}

TEST(SandboxJsonTest, EncodeThenDecodeGivesTheSameSandbox) {
  for (Sandbox s : {FullSandbox(), Sandbox{.id = "x", .state = "stopped"}}) {
    absl::StatusOr<Sandbox> back = DecodeSandbox(ToJson(s));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, s);
  }
  Sandbox failed = FullSandbox();
  failed.state = "failed";
  failed.failure = "the guest did not boot";
  failed.expires_at.reset();
  absl::StatusOr<std::vector<Sandbox>> list =
      DecodeSandboxList(SandboxListToJson({FullSandbox(), failed}));
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0], FullSandbox());
  EXPECT_EQ((*list)[1], failed);
}

TEST(SandboxJsonTest, WireNamesAndOptionalFields) {
  nlohmann::json j = ToJson(FullSandbox());
  EXPECT_EQ(j["created_at"], "1970-01-01T00:16:40.123Z");
  EXPECT_EQ(j["egress"], nlohmann::json({{"mode", "allowlist"}}));
  EXPECT_EQ(j["running_execs"], 1);
  EXPECT_EQ(j["dropped"],
            nlohmann::json({{"queue", 50}, {"connections", 2}, {"dns", 3}, {"events", 4}}));
  EXPECT_FALSE(j.contains("failure"));
  nlohmann::json bare = ToJson(Sandbox{.id = "x"});
  for (const char* absent : {"failure", "workspace", "egress", "dropped", "ready_at",
                             "last_active_at", "accel", "vmm_pid", "expires_at", "created_at"}) {
    EXPECT_FALSE(bare.contains(absent)) << absent;
  }
}

TEST(SandboxJsonTest, DecodeIgnoresUnknownFieldsAndNamesMistypedOnes) {
  nlohmann::json j = ToJson(FullSandbox());
  j["added_by_a_newer_daemon"] = {1, 2};
  EXPECT_TRUE(DecodeSandbox(j).ok());
  struct Case {
    nlohmann::json value;
    const char* field;
  };
  for (const Case& c : {Case{{{"id", 7}}, "id"}, Case{{{"cpus", "two"}}, "cpus"},
                        Case{{{"labels", {{"a", 1}}}}, "labels.a"},
                        Case{{{"created_at", "yesterday"}}, "created_at"},
                        Case{{{"egress", {{"mode", false}}}}, "egress.mode"},
                        Case{{{"egress", "open"}}, "egress"}}) {
    absl::StatusOr<Sandbox> s = DecodeSandbox(c.value);
    ASSERT_FALSE(s.ok()) << c.value;
    EXPECT_EQ(FieldOf(s.status()).value_or(""), c.field) << s.status();
    EXPECT_NE(s.status().message().find(c.field), absl::string_view::npos) << s.status();
  }
  absl::StatusOr<std::vector<Sandbox>> list =
      DecodeSandboxList({{"sandboxes", {ToJson(FullSandbox()), {{"memory_mib", 1.5}}}}});
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(FieldOf(list.status()).value_or(""), "sandboxes[1].memory_mib") << list.status();
  EXPECT_FALSE(DecodeSandboxList(nlohmann::json::object()).ok());
  EXPECT_FALSE(DecodeSandbox(nlohmann::json::array()).ok());
}

}  // namespace
}  // namespace abox::api
