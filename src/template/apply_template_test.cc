#include "src/template/apply_template.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::tmpl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

ProjectTemplate NodeTemplate() {
  ProjectTemplate t;
  t.source = ".abox.toml";
  t.preset = "node";
  t.setup = {"npm ci"};
  t.setup_allow = {"preset:npm"};
  t.cpus = 2;
  t.memory_mib = 4096;
  t.disk_mib = 32768;
  return t;
}

TEST(ApplyTemplateTest, FillsWhatThePersonDidNotSet) {
  api::SandboxCreate body;
  absl::StatusOr<AppliedTemplate> applied = ApplyTemplate(NodeTemplate(), {}, false, &body);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(body.image, "node");
  EXPECT_EQ(applied->image, "node");
  EXPECT_EQ(body.cpus, 2);
  EXPECT_EQ(body.memory_mib, 4096);
  EXPECT_EQ(body.disk_mib, 32768);
  ASSERT_TRUE(body.setup.has_value());
  EXPECT_THAT(body.setup->commands, ElementsAre("npm ci"));
  EXPECT_THAT(body.setup->allow, ElementsAre("preset:npm"));
  EXPECT_FALSE(body.egress.has_value());
  ASSERT_FALSE(applied->lines.empty());
  EXPECT_THAT(applied->lines[0], HasSubstr("preset node"));
}

TEST(ApplyTemplateTest, RootSetupRunsAsRootBeforeThePersons) {
  ProjectTemplate t = NodeTemplate();
  t.setup_root = {"apt-get install -y ./tool.deb"};
  api::SandboxCreate body;
  body.setup = api::SetupSpec{.commands = {"make"}, .root_commands = {"service x start"}};
  absl::StatusOr<AppliedTemplate> applied = ApplyTemplate(t, {}, false, &body);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_THAT(body.setup->root_commands,
              ElementsAre("apt-get install -y ./tool.deb", "service x start"));
  EXPECT_THAT(body.setup->commands, ElementsAre("npm ci", "make"));
  EXPECT_THAT(applied->lines, ::testing::Contains(HasSubstr("setup as root: apt-get install")));
}

TEST(ApplyTemplateTest, NeverOverridesWhatThePersonSet) {
  api::SandboxCreate body;
  body.image = "minimal";
  body.cpus = 1;
  body.memory_mib = 1024;
  body.disk_mib = 8192;
  body.setup = api::SetupSpec{.commands = {"make"}, .allow = {"preset:pypi"}};
  absl::StatusOr<AppliedTemplate> applied = ApplyTemplate(
      NodeTemplate(), {.image = true, .cpus = true, .memory = true, .disk = true}, false, &body);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(body.image, "minimal");
  EXPECT_TRUE(applied->image.empty());
  EXPECT_EQ(body.cpus, 1);
  EXPECT_EQ(body.memory_mib, 1024);
  EXPECT_EQ(body.disk_mib, 8192);
  // The template's setup runs first (it installs what the person's commands use).
  EXPECT_THAT(body.setup->commands, ElementsAre("npm ci", "make"));
  EXPECT_THAT(body.setup->allow, ElementsAre("preset:pypi", "preset:npm"));
  EXPECT_THAT(applied->lines.back(), HasSubstr("image minimal as asked"));
}

TEST(ApplyTemplateTest, PersistentEgressNeedsThePersonAndLeavesTheRequestAlone) {
  ProjectTemplate t = NodeTemplate();
  t.egress_allow = {"api.example.com"};
  api::SandboxCreate body;
  const api::SandboxCreate before = body;
  absl::StatusOr<AppliedTemplate> refused = ApplyTemplate(t, {}, false, &body);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.status().message(), HasSubstr("--allow-template-egress"));
  EXPECT_THAT(refused.status().message(), HasSubstr("api.example.com"));
  EXPECT_EQ(body, before);

  absl::StatusOr<AppliedTemplate> accepted = ApplyTemplate(t, {}, true, &body);
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  ASSERT_TRUE(body.egress.has_value());
  EXPECT_FALSE(body.egress->mode.has_value());  // the global mode stands
  EXPECT_THAT(body.egress->allow, ElementsAre("api.example.com"));
}

TEST(ApplyTemplateTest, PackagesGetAnImageOfTheirOwnNamedByWhatItHolds) {
  ProjectTemplate a = NodeTemplate();
  a.packages = {"libpq-dev", "graphviz"};
  ProjectTemplate b = NodeTemplate();
  b.packages = {"graphviz", "libpq-dev", "graphviz"};
  EXPECT_THAT(TemplateImageName(a), StartsWith("tpl-"));
  EXPECT_EQ(TemplateImageName(a), TemplateImageName(b));  // order and repeats do not matter
  ProjectTemplate c = a;
  c.preset = "python";
  EXPECT_NE(TemplateImageName(a), TemplateImageName(c));
  EXPECT_EQ(TemplateImageBuildCommand(a),
            "abox image build --preset node --packages graphviz,libpq-dev --name " +
                TemplateImageName(a));
}

TEST(ApplyTemplateTest, PresetImagesAndTheDeveloperDefault) {
  ProjectTemplate t;
  EXPECT_EQ(TemplateImageName(t), "");
  t.preset = "developer";
  EXPECT_EQ(TemplateImageName(t), "default");
  EXPECT_EQ(TemplateImageBuildCommand(t), "abox image build --preset developer");
  t.preset = "go";
  EXPECT_EQ(TemplateImageName(t), "go");
  EXPECT_EQ(TemplateImageBuildCommand(t), "abox image build --preset go");
  t.image = "mine";
  EXPECT_EQ(TemplateImageName(t), "mine");
}

TEST(ApplyTemplateTest, NothingRecognisedChangesNothing) {
  ProjectTemplate t;
  t.source = "auto";
  api::SandboxCreate body;
  const api::SandboxCreate before = body;
  absl::StatusOr<AppliedTemplate> applied = ApplyTemplate(t, {}, false, &body);
  ASSERT_TRUE(applied.ok());
  EXPECT_EQ(body, before);
  EXPECT_THAT(applied->lines[0], HasSubstr("nothing recognised"));
}

}  // namespace
}  // namespace abox::tmpl
