#include "src/net/policy.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace abox::net {
namespace {

EgressPolicy Allowlist(const std::vector<std::string>& rules) {
  EgressPolicy policy;
  policy.mode = EgressPolicy::Mode::kAllowlist;
  for (const std::string& text : rules) {
    absl::StatusOr<Rule> rule = ParseRule(text);
    EXPECT_TRUE(rule.ok()) << rule.status();
    if (rule.ok()) {
      policy.allow.push_back(*rule);
    }
  }
  return policy;
}

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

TEST(PolicyTest, ParsesEachRuleForm) {
  absl::StatusOr<Rule> exact = ParseRule("API.GitHub.com.");
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->kind, Rule::Kind::kExact);
  EXPECT_EQ(exact->name, "api.github.com");
  EXPECT_EQ(exact->ports, std::vector<uint16_t>{443});

  absl::StatusOr<Rule> wildcard = ParseRule("*.example.com:443,80,80");
  ASSERT_TRUE(wildcard.ok()) << wildcard.status();
  EXPECT_EQ(wildcard->kind, Rule::Kind::kWildcard);
  EXPECT_EQ(wildcard->name, "example.com");
  EXPECT_EQ(wildcard->ports, (std::vector<uint16_t>{80, 443}));

  absl::StatusOr<Rule> http = ParseRule("example.com:80");
  ASSERT_TRUE(http.ok());
  EXPECT_EQ(http->ports, std::vector<uint16_t>{80});

  absl::StatusOr<Rule> preset = ParseRule("preset:npm");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(preset->kind, Rule::Kind::kPreset);
  EXPECT_EQ(preset->name, "npm");

  absl::StatusOr<Rule> v4 = ParseRule("10.0.0.5:5432");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->kind, Rule::Kind::kAddress);
  EXPECT_EQ(v4->address, Ip("10.0.0.5"));
  EXPECT_EQ(v4->ports, std::vector<uint16_t>{5432});

  absl::StatusOr<Rule> v6 = ParseRule("[2001:DB8::5]:22");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->address, Ip("2001:db8::5"));
}

TEST(PolicyTest, RuleTextRoundTrips) {
  for (const char* text :
       {"api.github.com", "*.example.com", "example.com:80", "*.example.com:80,443", "preset:pypi",
        "10.0.0.5:5432", "[2001:db8::5]:22,2222"}) {
    absl::StatusOr<Rule> rule = ParseRule(text);
    ASSERT_TRUE(rule.ok()) << text << rule.status();
    EXPECT_EQ(rule->ToString(), text);
    EXPECT_EQ(*ParseRule(rule->ToString()), *rule);
  }
}

TEST(PolicyTest, RefusesBadRulesWithAReason) {
  std::vector<std::pair<const char*, const char*>> cases = {
      {"", "1 to 300"},
      {"pypi", "did you mean preset:pypi?"},
      {"intranet", "fully qualified"},
      {"preset:nope", "known presets: pypi, npm"},
      {"preset:pypi:80", "unknown preset"},
      {"*", "only allowed as a leading"},
      {"*.com", "too broad"},
      {"a.*.example.com", "only allowed as a leading"},
      {"**.example.com", "only allowed as a leading"},
      {"example.com:", "nothing after ':'"},
      {"example.com:0", "1 to 65535"},
      {"example.com:65536", "1 to 65535"},
      {"example.com:+80", "1 to 65535"},
      {"example.com:80,", "1 to 65535"},
      {"example.com:1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "more than 16 ports"},
      {"bad_name.example", "not a valid host name"},
      {"b\xc3\xbc"
       "cher.example",
       "IDNA"},
      {"10.0.0.5", "needs its port"},
      {"[2001:db8::5]", "needs its port"},
      {"[10.0.0.5]:80", "IPv6"},
      {"2001:db8::5:22", "[ADDRESS]:PORT"},
      {"169.254.169.254:80", "cloud-metadata"},
      {"0.0.0.0:80", "unspecified"},
      {"224.0.0.1:80", "multicast"},
      {"255.255.255.255:80", "broadcast"},
      {"[fd00:ec2::254]:80", "cloud-metadata"},
      {"168.63.129.16:80", "cloud-metadata"},
      {"100.100.100.200:80", "cloud-metadata"},
      {"127.0.0.1:5432", "loopback"},
      {"127.1:80", "not a valid host name"},
  };
  for (const auto& [text, want] : cases) {
    absl::StatusOr<Rule> rule = ParseRule(text);
    ASSERT_FALSE(rule.ok()) << text;
    EXPECT_EQ(rule.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(rule.status().message().find(want), std::string::npos)
        << text << ": " << rule.status().message();
  }
}

TEST(PolicyTest, ExactRulesMatchOnlyTheirNameAndPorts) {
  EgressPolicy policy = Allowlist({"api.github.com", "deb.example.org:80"});
  EXPECT_TRUE(Decide(policy, "api.github.com", 443).allowed);
  EXPECT_TRUE(Decide(policy, "API.GITHUB.COM.", 443).allowed);
  EXPECT_EQ(Decide(policy, "api.github.com", 443).matched_rule, "api.github.com");
  EXPECT_FALSE(Decide(policy, "github.com", 443).allowed);
  EXPECT_FALSE(Decide(policy, "x.api.github.com", 443).allowed);
  Decision wrong_port = Decide(policy, "api.github.com", 80);
  EXPECT_FALSE(wrong_port.allowed);
  EXPECT_NE(wrong_port.reason.find("add a rule api.github.com:80"), std::string::npos)
      << wrong_port.reason;
  EXPECT_TRUE(Decide(policy, "deb.example.org", 80).allowed);
  EXPECT_FALSE(Decide(policy, "deb.example.org", 443).allowed);
}

TEST(PolicyTest, WildcardsMatchDeeperNamesButNotTheBareSuffix) {
  EgressPolicy policy = Allowlist({"*.example.com"});
  EXPECT_TRUE(Decide(policy, "a.example.com", 443).allowed);
  EXPECT_TRUE(Decide(policy, "a.b.example.com", 443).allowed);
  EXPECT_FALSE(Decide(policy, "example.com", 443).allowed);
  EXPECT_FALSE(Decide(policy, "badexample.com", 443).allowed);
  EXPECT_FALSE(Decide(policy, "example.com.evil.net", 443).allowed);
  EXPECT_FALSE(Decide(policy, "a.example.com", 80).allowed);
}

TEST(PolicyTest, PresetsAllowTheirHostsAndSayWhichEntryMatched) {
  EgressPolicy policy = Allowlist({"preset:pypi", "preset:debian", "preset:github"});
  Decision files = Decide(policy, "files.pythonhosted.org", 443);
  ASSERT_TRUE(files.allowed) << files.reason;
  EXPECT_EQ(files.matched_rule, "preset:pypi (files.pythonhosted.org)");
  EXPECT_TRUE(Decide(policy, "pypi.org", 443).allowed);
  EXPECT_TRUE(Decide(policy, "deb.debian.org", 80).allowed);
  EXPECT_TRUE(Decide(policy, "security.debian.org", 443).allowed);
  EXPECT_FALSE(Decide(policy, "salsa.debian.org", 443).allowed);
  EXPECT_TRUE(Decide(policy, "objects.githubusercontent.com", 443).allowed);
  EXPECT_TRUE(Decide(policy, "codeload.github.com", 443).allowed);
  EXPECT_FALSE(Decide(policy, "registry.npmjs.org", 443).allowed);
  EXPECT_FALSE(Decide(policy, "pypi.org", 80).allowed);
}

TEST(PolicyTest, EveryPresetIsDocumentedAndNonEmpty) {
  std::vector<std::string> names;
  for (const Preset& preset : Presets()) {
    names.push_back(preset.name);
    EXPECT_FALSE(preset.rules.empty()) << preset.name;
    EXPECT_NE(std::string(preset.source).find("https://"), std::string::npos) << preset.name;
    EXPECT_EQ(FindPreset(preset.name), &preset);
    for (const Rule& rule : preset.rules) {
      EXPECT_TRUE(rule.kind == Rule::Kind::kExact || rule.kind == Rule::Kind::kWildcard);
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"pypi", "npm", "github", "debian", "ubuntu", "crates",
                                             "go"}));
  EXPECT_EQ(FindPreset("nope"), nullptr);
  EgressPolicy go = Allowlist({"preset:go", "preset:crates", "preset:ubuntu", "preset:npm"});
  for (const char* host :
       {"proxy.golang.org", "sum.golang.org", "index.crates.io", "static.crates.io", "crates.io",
        "us.archive.ubuntu.com", "registry.npmjs.org"}) {
    EXPECT_TRUE(Decide(go, host, 443).allowed) << host;
  }
  EXPECT_FALSE(Decide(go, "storage.googleapis.com", 443).allowed);
}

TEST(PolicyTest, ModesNoneAndOpen) {
  EgressPolicy unset;
  unset.allow = Allowlist({"a.example"}).allow;
  Decision off = Decide(unset, "a.example", 443);
  EXPECT_FALSE(off.allowed);
  EXPECT_NE(off.reason.find("mode none"), std::string::npos);
  EgressPolicy none = unset;
  none.mode = EgressPolicy::Mode::kNone;
  EXPECT_FALSE(Decide(none, "a.example", 443).allowed);
  EXPECT_FALSE(DecideAddress(none, Ip("10.0.0.5"), 5432).allowed);

  EgressPolicy open;
  open.mode = EgressPolicy::Mode::kOpen;
  Decision any = Decide(open, "anything.example", 8080);
  EXPECT_TRUE(any.allowed);
  EXPECT_EQ(any.matched_rule, "mode:open");
  // Open mode opens names, not raw TCP.
  EXPECT_FALSE(DecideAddress(open, Ip("93.184.215.14"), 22).allowed);
}

TEST(PolicyTest, OpenModeRefusesSingleLabelNamesAndNoRuleCanAllowThem) {
  EgressPolicy open;
  open.mode = EgressPolicy::Mode::kOpen;
  for (const char* name : {"db", "localhost", "Metadata.", "wpad"}) {
    Decision d = Decide(open, name, 443);
    EXPECT_FALSE(d.allowed) << name;
    EXPECT_FALSE(d.rule_can_allow) << name;
    EXPECT_NE(d.reason.find("not a fully qualified name"), std::string::npos) << d.reason;
  }
  EXPECT_FALSE(Decide(Allowlist({"db.example"}), "db", 443).rule_can_allow);
  EXPECT_TRUE(Decide(open, "db.example", 443).allowed);
  EXPECT_TRUE(Decide(Allowlist({"db.example"}), "other.example", 443).rule_can_allow);
}

TEST(PolicyTest, LoopbackAddressRulesNeedAllowLoopback) {
  for (const char* text :
       {"127.0.0.1:5432", "127.255.0.1:80", "[::1]:22", "[::ffff:127.0.0.1]:22"}) {
    absl::StatusOr<Rule> refused = ParseRule(text);
    ASSERT_FALSE(refused.ok()) << text;
    EXPECT_NE(refused.status().message().find("--allow-loopback"), std::string::npos)
        << refused.status();
    absl::StatusOr<Rule> admitted = ParseRule(text, {.allow_loopback = true});
    ASSERT_TRUE(admitted.ok()) << admitted.status();
    EXPECT_TRUE(IsLoopbackRule(*admitted));
  }
  EXPECT_FALSE(IsLoopbackRule(*ParseRule("10.0.0.5:5432")));
  // The flag opens loopback only: metadata and the rest stay closed.
  EXPECT_FALSE(ParseRule("169.254.169.254:80", {.allow_loopback = true}).ok());
  EXPECT_FALSE(ParseRule("168.63.129.16:80", {.allow_loopback = true}).ok());
  // What was stored reads back.
  absl::StatusOr<EgressPolicy> stored =
      PolicyFromJson(R"({"mode":"allowlist","allow":["127.0.0.1:5432"]})");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(DecideAddress(*stored, Ip("127.0.0.1"), 5432).allowed);
}

TEST(PolicyTest, RefusesInvalidNamesAndIpLiteralsByName) {
  EgressPolicy open;
  open.mode = EgressPolicy::Mode::kOpen;
  Decision ip = Decide(open, "10.0.0.5", 443);
  EXPECT_FALSE(ip.allowed);
  EXPECT_NE(ip.reason.find("IP address"), std::string::npos) << ip.reason;
  EXPECT_FALSE(Decide(open, "[::1]", 443).allowed);
  EXPECT_FALSE(Decide(open, "127.1", 443).allowed);
  EXPECT_FALSE(Decide(open, "a..example", 443).allowed);
  EXPECT_FALSE(Decide(open, std::string("a.example\0b", 11), 443).allowed);
}

TEST(PolicyTest, AddressRulesAllowExactlyTheirAddressAndPort) {
  EgressPolicy policy = Allowlist({"10.0.0.5:5432", "[2001:db8::5]:22", "api.github.com"});
  Decision db = DecideAddress(policy, Ip("10.0.0.5"), 5432);
  EXPECT_TRUE(db.allowed);
  EXPECT_EQ(db.matched_rule, "10.0.0.5:5432");
  EXPECT_TRUE(DecideAddress(policy, Ip("::ffff:10.0.0.5"), 5432).allowed);
  EXPECT_FALSE(DecideAddress(policy, Ip("10.0.0.5"), 5433).allowed);
  EXPECT_FALSE(DecideAddress(policy, Ip("10.0.0.6"), 5432).allowed);
  EXPECT_TRUE(DecideAddress(policy, Ip("2001:db8::5"), 22).allowed);
  Decision raw = DecideAddress(policy, Ip("140.82.112.6"), 443);
  EXPECT_FALSE(raw.allowed);
  EXPECT_NE(raw.reason.find("IP:PORT"), std::string::npos);
  // Address rules never allow a name.
  EXPECT_FALSE(Decide(policy, "db.example.com", 5432).allowed);
}

TEST(PolicyTest, MergeAddsSandboxRulesAndPrefersTheSandboxMode) {
  EgressPolicy global = Allowlist({"preset:pypi", "api.github.com"});
  EgressPolicy sandbox;
  sandbox.allow = Allowlist({"api.github.com", "a.example"}).allow;
  EgressPolicy merged = MergePolicies(global, sandbox);
  EXPECT_EQ(merged.mode, EgressPolicy::Mode::kAllowlist);
  ASSERT_EQ(merged.allow.size(), 3u);
  EXPECT_EQ(merged.allow[2].ToString(), "a.example");
  EXPECT_TRUE(Decide(merged, "a.example", 443).allowed);
  EXPECT_TRUE(Decide(merged, "pypi.org", 443).allowed);

  sandbox.mode = EgressPolicy::Mode::kNone;
  EXPECT_EQ(MergePolicies(global, sandbox).mode, EgressPolicy::Mode::kNone);
  EXPECT_FALSE(MergePolicies(EgressPolicy{}, EgressPolicy{}).mode.has_value());
}

TEST(PolicyTest, JsonRoundTrips) {
  EgressPolicy policy = Allowlist({"preset:pypi", "*.example.com:80,443", "10.0.0.5:5432"});
  std::string json = PolicyToJson(policy);
  EXPECT_EQ(
      json,
      R"({"allow":["preset:pypi","*.example.com:80,443","10.0.0.5:5432"],"mode":"allowlist"})");
  absl::StatusOr<EgressPolicy> back = PolicyFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->mode, policy.mode);
  EXPECT_EQ(back->allow, policy.allow);
  absl::StatusOr<EgressPolicy> unset = PolicyFromJson(PolicyToJson(EgressPolicy{}));
  ASSERT_TRUE(unset.ok());
  EXPECT_FALSE(unset->mode.has_value());
  EXPECT_TRUE(unset->allow.empty());
}

TEST(PolicyTest, JsonRefusesBadInputWithTheField) {
  std::vector<std::pair<const char*, const char*>> cases = {
      {"", "not a JSON object"},
      {"[]", "not a JSON object"},
      {"{\"mode\":", "not a JSON object"},
      {R"({"mode":1})", "'mode' must be a string"},
      {R"({"mode":"closed"})", "not one of none, allowlist, open"},
      {R"({"allow":"a.example"})", "'allow' must be an array"},
      {R"({"allow":[1]})", "allow[0] must be a string"},
      {R"({"allow":["a.example","*.com"]})", "allow[1]: egress rule '*.com'"},
      {R"({"deny":[]})", "unknown key 'deny'"},
  };
  for (const auto& [text, want] : cases) {
    absl::StatusOr<EgressPolicy> policy = PolicyFromJson(text);
    ASSERT_FALSE(policy.ok()) << text;
    EXPECT_NE(policy.status().message().find(want), std::string::npos)
        << text << ": " << policy.status().message();
  }
  EXPECT_EQ(ParseMode("open").value(), EgressPolicy::Mode::kOpen);
}

}  // namespace
}  // namespace abox::net
