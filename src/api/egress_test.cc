#include "src/api/egress.h"

#include "gtest/gtest.h"
#include "src/api/errors.h"
#include "src/api/wire.h"

namespace abox::api {
namespace {

EgressRequest Pending() {
  return {.sandbox = "0123456789ab",
          .name = "evil.example",
          .port = 443,
          .count = 3,
          .first_seen = absl::FromUnixSeconds(1000),
          .last_seen = absl::FromUnixSeconds(1005),
          .state = "pending",
          .reason = "no rule allows evil.example:443"};
}

TEST(EgressJsonTest, PoliciesRoundTripWithNullModeForInherited) {
  EgressPolicy global{.rules = {.mode = "allowlist", .allow = {"pypi.org"}}};
  EXPECT_EQ(Dump(ToJson(global)), R"({"allow":["pypi.org"],"mode":"allowlist"})");
  EXPECT_EQ(*DecodeEgressPolicy(ToJson(global)), global);
  EgressPolicy sandbox{.rules = {.allow = {}},
                       .sandbox = "0123456789ab",
                       .effective = EgressRules{.mode = "open", .allow = {"a"}},
                       .warnings = {"loopback"}};
  EXPECT_EQ(ToJson(sandbox)["mode"], nullptr);
  EXPECT_EQ(*DecodeEgressPolicy(ToJson(sandbox)), sandbox);
}

TEST(EgressJsonTest, RequestsRoundTripAndStayStrict) {
  EgressPolicyUpdate update{.rules = {.allow = {"a:80"}}, .allow_loopback = true};
  EXPECT_EQ(*DecodeEgressPolicyUpdate(Dump(ToJson(update))), update);
  EgressRuleChange change{.add = {"a"}, .remove = {"b"}};
  EXPECT_EQ(*DecodeEgressRuleChange(Dump(ToJson(change))), change);
  EXPECT_EQ(FieldOf(DecodeEgressRuleChange("{}").status()).value_or(""), "add");
  EgressName approve{.name = "x.example", .once = false};
  EXPECT_EQ(*DecodeEgressName(Dump(ToJson(approve)), /*with_once=*/true), approve);
  EXPECT_EQ(
      FieldOf(DecodeEgressName(Dump(ToJson(approve)), /*with_once=*/false).status()).value_or(""),
      "once");
  EXPECT_EQ(FieldOf(DecodeEgressName("{}", false).status()).value_or(""), "name");
}

TEST(EgressJsonTest, AnswersRoundTrip) {
  EgressRequest once = Pending();
  once.state = "approved_once";
  once.once_port = 443;
  once.once_used = true;
  EgressQueue queue{.requests = {Pending(), once},
                    .queue_cap = 1000,
                    .queue_full = {{.sandbox = "0123456789ab", .dropped = 7}}};
  EXPECT_EQ(*DecodeEgressQueue(ToJson(queue)), queue);
  EXPECT_FALSE(ToJson(Pending()).contains("once_port"));
  EXPECT_EQ(ToJson(Pending())["last_seen"], "1970-01-01T00:16:45.000Z");

  EgressDecision decision{.request = once, .rule = "x.example", .note = "port 80 asked"};
  EXPECT_EQ(*DecodeEgressDecision(ToJson(decision)), decision);
  EXPECT_EQ(Dump(ToJson(EgressDecision{.request = Pending()})),
            Dump({{"request", ToJson(Pending())}}));
  EgressIgnored ignored{.name = "x", .requests_changed = 2};
  EXPECT_EQ(*DecodeEgressIgnored(ToJson(ignored)), ignored);

  EgressLog log{.sandbox = "0123456789ab",
                .connections = {{.time = absl::FromUnixSeconds(1),
                                 .kind = "tls",
                                 .name = "pypi.org",
                                 .address = "151.101.0.223",
                                 .port = 443,
                                 .verdict = "allowed",
                                 .matched_rule = "preset:pypi",
                                 .bytes_up = 10,
                                 .bytes_down = 20,
                                 .duration_ms = 30}},
                .dns = {{.time = absl::FromUnixSeconds(2),
                         .name = "pypi.org",
                         .qtype = 1,
                         .verdict = "allowed",
                         .answers = {"151.101.0.223"},
                         .via_override = true}},
                .dropped = {.queue = 1, .connections = 2, .dns = 3, .events = 4}};
  EXPECT_EQ(*DecodeEgressLog(ToJson(log)), log);
}

TEST(EgressJsonTest, DecodeNamesMistypedFields) {
  EXPECT_EQ(FieldOf(DecodeEgressLog({{"connections", {{{"port", "x"}}}}}).status()).value_or(""),
            "connections[0].port");
  EXPECT_EQ(FieldOf(DecodeEgressLog({{"dropped", "lots"}}).status()).value_or(""), "dropped");
  EXPECT_EQ(FieldOf(DecodeEgressQueue({{"requests", {{{"last_seen", 5}}}}}).status()).value_or(""),
            "requests[0].last_seen");
  EXPECT_EQ(FieldOf(DecodeEgressPolicy({{"mode", 1}}).status()).value_or(""), "mode");
  EXPECT_TRUE(DecodeEgressIgnored({{"name", "x"}, {"new", 1}}).ok());
}

}  // namespace
}  // namespace abox::api
