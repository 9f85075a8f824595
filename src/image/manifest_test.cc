#include "src/image/manifest.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "src/image/sha256.h"

namespace abox::image {
namespace {

using nlohmann::json;

Manifest Sample() {
  Manifest m;
  m.name = "default";
  m.created_at = "2024-05-01T10:00:00Z";
  m.artifacts[kRootfsFile] = {Sha256Hex("rootfs"), 2147483648u, 1714557600000000001};
  m.artifacts[kVmlinuxFile] = {Sha256Hex("vmlinux"), 53241868, 2};
  m.artifacts[kInitramfsFile] = {Sha256Hex("initramfs"), 3280076, 3};
  m.kernel_version = "6.1.0-28-cloud-amd64";
  m.kernel_package = "6.1.119-1";
  m.kernel_cmdline = "console=ttyS0 panic=-1";
  m.agent_version = "0.1.0";
  m.agent_sha256 = Sha256Hex("agent");
  m.protocol_version = 3;
  m.suite = "bookworm";
  m.mirror = "http://deb.debian.org/debian";
  m.arch = "amd64";
  m.extra_packages = {"jq"};
  m.packages = {"bash=5.2.15-2+b2", "jq=1.6-2.1"};
  m.initramfs_modules = {"virtio_ring", "virtio"};
  m.rootfs_key = Sha256Hex("key");
  m.inputs = Sha256Hex("inputs");
  m.builder_version = "abox-image-1";
  return m;
}

// Returns the sample manifest as JSON with `edit` applied.
std::string Edited(const std::function<void(json&)>& edit) {
  json j = json::parse(ManifestToJson(Sample()));
  edit(j);
  return j.dump();
}

TEST(ManifestTest, RoundTripsEveryField) {
  Manifest m = Sample();
  auto parsed = ParseManifest(ManifestToJson(m));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, m);
}

TEST(ManifestTest, RoundTripsCodingAgents) {
  Manifest m = Sample();
  m.coding_agents = {{"claude", "@anthropic-ai/claude-code", "2.1.332", "sha512-abc==",
                      "/usr/local/bin/claude", "/opt/abox/agents/claude/2.1.332/claude"},
                     {"codex", "@openai/codex", "0.171.0", "sha512-def==", "/usr/local/bin/codex",
                      "/opt/abox/agents/codex/0.171.0/bin/codex"}};
  auto parsed = ParseManifest(ManifestToJson(m));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, m);
  EXPECT_EQ(parsed->coding_agents[1].binary, "/opt/abox/agents/codex/0.171.0/bin/codex");
}

TEST(ManifestTest, ReadsManifestsFromBeforeCodingAgents) {
  // Manifests written before --agent existed have no coding_agents key; one without agents is
  // written the same way, so older abox versions still read it.
  EXPECT_EQ(ManifestToJson(Sample()).find("coding_agents"), std::string::npos);
  auto parsed = ParseManifest(ManifestToJson(Sample()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->coding_agents.empty());
}

TEST(ManifestTest, RejectsMalformedCodingAgents) {
  EXPECT_FALSE(ParseManifest(Edited([](json& j) { j["coding_agents"] = "claude"; })).ok());
  EXPECT_FALSE(ParseManifest(Edited([](json& j) { j["coding_agents"] = {1}; })).ok());
  auto s = ParseManifest(Edited([](json& j) {
    j["coding_agents"] = json::array({{{"name", "claude"}, {"version", "1"}}});
  }));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("coding_agents"), std::string::npos);
}

TEST(ManifestTest, RoundTripsThePresetAndReadsManifestsWithoutOne) {
  Manifest m = Sample();
  m.preset = "python";
  auto parsed = ParseManifest(ManifestToJson(m));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->preset, "python");
  EXPECT_EQ(ManifestToJson(Sample()).find("\"preset\""), std::string::npos);
  auto bad = ParseManifest(Edited([](json& j) { j["preset"] = 3; }));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("preset"), std::string::npos);
}

TEST(ManifestTest, SerializationIsStable) {
  EXPECT_EQ(ManifestToJson(Sample()), ManifestToJson(Sample()));
  EXPECT_NE(ManifestToJson(Sample()).find("\"rootfs.ext4\""), std::string::npos);
}

TEST(ManifestTest, RejectsMalformedJson) {
  EXPECT_FALSE(ParseManifest("").ok());
  EXPECT_FALSE(ParseManifest("{\"name\": ").ok());
  EXPECT_FALSE(ParseManifest("[1, 2]").ok());
  EXPECT_FALSE(ParseManifest("\"default\"").ok());
}

TEST(ManifestTest, RejectsMissingOrMistypedFields) {
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
  };
  const Case cases[] = {
      {"no name", [](json& j) { j.erase("name"); }},
      {"name not string", [](json& j) { j["name"] = 7; }},
      {"negative protocol", [](json& j) { j["protocol_version"] = -1; }},
      {"protocol too big", [](json& j) { j["protocol_version"] = 1ull << 40; }},
      {"protocol as string", [](json& j) { j["protocol_version"] = "3"; }},
      {"packages not array", [](json& j) { j["packages"] = "bash"; }},
      {"package not string", [](json& j) { j["packages"][0] = 1; }},
      {"bad agent hash", [](json& j) { j["agent_sha256"] = "xyz"; }},
      {"upper-case hash", [](json& j) { j["inputs"] = std::string(64, 'A'); }},
      {"future format", [](json& j) { j["format"] = kManifestFormat + 1; }},
      {"no artifacts", [](json& j) { j.erase("artifacts"); }},
      {"missing rootfs", [](json& j) { j["artifacts"].erase(kRootfsFile); }},
      {"unknown artifact",
       [](json& j) { j["artifacts"]["../../etc/passwd"] = j["artifacts"][kVmlinuxFile]; }},
      {"artifact bad size", [](json& j) { j["artifacts"][kVmlinuxFile]["size"] = -5; }},
      {"artifact bad hash", [](json& j) { j["artifacts"][kInitramfsFile]["sha256"] = "00"; }},
      {"kernel version path", [](json& j) { j["kernel_version"] = "../x"; }},
  };
  for (const Case& c : cases) {
    auto m = ParseManifest(Edited(c.edit));
    EXPECT_FALSE(m.ok()) << c.what;
  }
  auto missing = ParseManifest(Edited([](json& j) { j.erase("suite"); }));
  EXPECT_NE(missing.status().message().find("suite"), std::string::npos) << missing.status();
}

TEST(ManifestTest, IgnoresUnknownTopLevelFieldsForForwardCompatibility) {
  auto m = ParseManifest(Edited([](json& j) { j["new_field"] = {1, 2}; }));
  EXPECT_TRUE(m.ok()) << m.status();
}

TEST(ManifestTest, ChecksNameAgainstDirectory) {
  Manifest m = Sample();
  EXPECT_TRUE(CheckManifestName(m, "default").ok());
  absl::Status s = CheckManifestName(m, "other");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("other"), std::string::npos);
}

}  // namespace
}  // namespace abox::image
