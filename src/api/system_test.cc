#include "src/api/system.h"

#include "gtest/gtest.h"
#include "src/api/errors.h"
#include "src/api/wire.h"

namespace abox::api {
namespace {

TEST(HealthJsonTest, EncodeThenDecodeGivesTheSameHealth) {
  Health h{.status = "ok",
           .pid = 4242,
           .uptime_seconds = 3723.5,
           .sandboxes = 2,
           .ledger = Ledger{3, 8, 1536, 16384},
           .accel = "kvm"};
  EXPECT_EQ(Dump(ToJson(h)),
            R"({"accel":"kvm","ledger":{"cpus_budget":8,"cpus_used":3,"memory_mib_budget":16384,)"
            R"("memory_mib_used":1536},"pid":4242,"sandboxes":2,"status":"ok",)"
            R"("uptime_seconds":3723.5})");
  absl::StatusOr<Health> back = DecodeHealth(ToJson(h));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, h);
  Health bare{.status = "ok"};
  EXPECT_EQ(Dump(ToJson(bare)), R"({"status":"ok"})");
  EXPECT_EQ(*DecodeHealth(ToJson(bare)), bare);
}

TEST(HealthJsonTest, DecodeNamesMistypedFields) {
  for (const auto& [value, field] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"status", 1}}, "status"},
           {{{"uptime_seconds", "long"}}, "uptime_seconds"},
           {{{"ledger", {{"cpus_used", 1.5}}}}, "ledger.cpus_used"}}) {
    absl::StatusOr<Health> h = DecodeHealth(value);
    ASSERT_FALSE(h.ok()) << value;
    EXPECT_EQ(FieldOf(h.status()).value_or(""), field) << h.status();
  }
  EXPECT_TRUE(DecodeHealth({{"status", "ok"}, {"new", {1}}}).ok());
}

TEST(VersionJsonTest, EncodeThenDecode) {
  Version v{.version = "0.1.0", .api = "v1", .protocol = 2};
  EXPECT_EQ(Dump(ToJson(v)), R"({"api":"v1","protocol":2,"version":"0.1.0"})");
  EXPECT_EQ(*DecodeVersion(ToJson(v)), v);
  EXPECT_EQ(FieldOf(DecodeVersion({{"protocol", "2"}}).status()).value_or(""), "protocol");
}

}  // namespace
}  // namespace abox::api
