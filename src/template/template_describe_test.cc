#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/template/project_template.h"

namespace abox::tmpl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ProjectTemplate Parsed(std::string_view text) {
  absl::StatusOr<ProjectTemplate> t = ParseTemplate(".abox.toml", text);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : ProjectTemplate{};
}

TEST(TemplateDescribeTest, DescribesEverythingAFileSets) {
  ProjectTemplate t = Parsed(R"(preset = "node"
packages = ["libpq-dev"]
setup = ["npm ci", "npm run build"]
[resources]
cpus = 2
memory = "4GiB"
disk = "32GiB"
[egress]
allow = ["api.example.com"]
setup_allow = ["preset:npm"]
)");
  EXPECT_THAT(DescribeTemplate(t),
              ElementsAre("template .abox.toml: preset node, 2 CPUs, 4096 MiB, disk 32768 MiB",
                          "packages: libpq-dev",
                          "setup: npm ci; npm run build (may reach preset:npm while it runs)",
                          "asks for egress: api.example.com (needs --allow-template-egress)"));
}

TEST(TemplateDescribeTest, DescribesDefaultsAndOneCpu) {
  EXPECT_THAT(DescribeTemplate(Parsed("")),
              ElementsAre("template .abox.toml: no image, preset or resources set (defaults "
                          "apply)"));
  EXPECT_THAT(DescribeTemplate(Parsed("image = \"py\"\nresources.cpus = 1\nsetup = [\"make\"]")),
              ElementsAre("template .abox.toml: image py, 1 CPU", "setup: make"));
  EXPECT_THAT(DescribeTemplate(Parsed("egress.setup_allow = [\"preset:go\"]")),
              ElementsAre(HasSubstr("defaults apply"),
                          "setup_allow (preset:go) has no effect: there are no setup commands"));
}

TEST(TemplateDescribeTest, DescribesAutoDetection) {
  ProjectTemplate nothing;
  nothing.source = "auto";
  EXPECT_THAT(DescribeTemplate(nothing),
              ElementsAre("template auto: nothing recognised; using the developer image"));

  ProjectTemplate java;
  java.source = "auto (pom.xml)";
  java.preset = "java";
  java.detected = {"pom.xml"};
  java.notes = {"Maven Central has no egress preset yet"};
  EXPECT_THAT(DescribeTemplate(java), ElementsAre("template auto (pom.xml): preset java",
                                                  "note: Maven Central has no egress preset yet"));
}

TEST(TemplateDescribeTest, EscapesControlCharactersFromTheRepository) {
  std::vector<std::string> lines =
      DescribeTemplate(Parsed("setup = [\"echo \\u001b]0;owned\\u0007 done\"]"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "setup: echo \\x1B]0;owned\\x07 done");
}

TEST(TemplateEgressTest, TemplateWithoutLastingEgressNeedsNoConsent) {
  EXPECT_TRUE(CheckTemplateEgress(Parsed("egress.setup_allow = [\"preset:npm\"]"), false).ok());
  EXPECT_TRUE(CheckTemplateEgress(Parsed(""), false).ok());
}

TEST(TemplateEgressTest, LastingEgressNeedsThePersonsConsent) {
  ProjectTemplate t = Parsed("[egress]\nallow = [\"api.example.com\", \"preset:pypi\"]");
  absl::Status refused = CheckTemplateEgress(t, false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message(),
            "the repository's .abox.toml asks to allow api.example.com, preset:pypi for the "
            "sandbox's whole life; a template cannot widen egress on its own: rerun with "
            "--allow-template-egress to accept, or drop the [egress] allow list");
  EXPECT_TRUE(CheckTemplateEgress(t, true).ok());
}

TEST(TemplateEgressTest, OpenEgressIsRefusedEvenWithConsent) {
  ProjectTemplate t;
  t.source = ".abox.toml";
  t.egress_allow = {"example.com", "*"};
  absl::Status refused = CheckTemplateEgress(t, true);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("asks for open egress (*); a template cannot open egress, even with "
                        "--allow-template-egress"));
}

TEST(TemplateEgressTest, SetupEgressBeyondPresetsIsRefused) {
  ProjectTemplate t;
  t.source = ".abox.toml";
  t.setup_allow = {"evil.example.com"};
  absl::Status refused = CheckTemplateEgress(t, true);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("setup egress may only name package presets"));
}

}  // namespace
}  // namespace abox::tmpl
