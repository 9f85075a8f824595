#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/testing/temp_dir.h"
#include "src/template/project_template.h"

namespace abox::tmpl {
namespace {

using ::abox::base::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using Strings = std::vector<std::string>;

// A workspace holding the named (empty) files.
class Workspace {
 public:
  explicit Workspace(const Strings& files) {
    for (const std::string& name : files) {
      Touch(name);
    }
  }
  void Touch(const std::string& name) const {
    std::ofstream out(dir_.file(name));
    EXPECT_TRUE(out.good()) << name;
  }
  [[nodiscard]] const TempDir& dir() const { return dir_; }
  [[nodiscard]] ProjectTemplate Detect() const {
    absl::StatusOr<ProjectTemplate> t = DetectTemplate(dir_.path());
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *std::move(t) : ProjectTemplate{};
  }

 private:
  TempDir dir_;
};

TEST(TemplateDetectTest, NodeWithALockFileRunsNpmCi) {
  ProjectTemplate t = Workspace({"package.json", "package-lock.json", "README.md"}).Detect();
  EXPECT_EQ(t.source, "auto (package.json, package-lock.json)");
  EXPECT_EQ(t.preset, "node");
  EXPECT_EQ(t.setup, Strings{"npm ci"});
  EXPECT_EQ(t.setup_allow, Strings{"preset:npm"});
  EXPECT_THAT(t.detected, ElementsAre("package.json", "package-lock.json"));
  EXPECT_THAT(t.notes, IsEmpty());
  EXPECT_FALSE(t.image.has_value());
  EXPECT_THAT(t.egress_allow, IsEmpty());  // auto never asks for lasting egress
}

TEST(TemplateDetectTest, NodeWithoutALockFileRunsNpmInstallAndNotesOtherLockFiles) {
  ProjectTemplate t = Workspace({"package.json", "yarn.lock", "pnpm-lock.yaml"}).Detect();
  EXPECT_EQ(t.setup, Strings{"npm install"});
  EXPECT_THAT(t.detected, ElementsAre("package.json", "yarn.lock", "pnpm-lock.yaml"));
  ASSERT_EQ(t.notes.size(), 2u);
  EXPECT_THAT(t.notes[0], HasSubstr("yarn.lock found, but the setup uses npm"));
  EXPECT_THAT(t.notes[1], HasSubstr("pnpm install --frozen-lockfile"));
}

TEST(TemplateDetectTest, PythonPrefersRequirementsTxt) {
  ProjectTemplate t = Workspace({"requirements.txt", "pyproject.toml"}).Detect();
  EXPECT_EQ(t.preset, "python");
  EXPECT_EQ(t.setup, Strings{"python3 -m venv .venv && .venv/bin/pip install -r requirements.txt"});
  EXPECT_EQ(t.setup_allow, Strings{"preset:pypi"});
  EXPECT_THAT(t.detected, ElementsAre("requirements.txt", "pyproject.toml"));
}

TEST(TemplateDetectTest, PythonProjectWithoutRequirementsInstallsItself) {
  for (const char* marker : {"pyproject.toml", "setup.py"}) {
    ProjectTemplate t = Workspace({marker}).Detect();
    EXPECT_EQ(t.preset, "python") << marker;
    EXPECT_EQ(t.setup, Strings{"python3 -m venv .venv && .venv/bin/pip install -e ."}) << marker;
  }
}

TEST(TemplateDetectTest, GoAndRust) {
  ProjectTemplate go = Workspace({"go.mod", "go.sum"}).Detect();
  EXPECT_EQ(go.preset, "go");
  EXPECT_EQ(go.setup, Strings{"go mod download"});
  EXPECT_EQ(go.setup_allow, Strings{"preset:go"});
  EXPECT_EQ(go.source, "auto (go.mod)");

  ProjectTemplate rust = Workspace({"Cargo.toml", "Cargo.lock"}).Detect();
  EXPECT_EQ(rust.preset, "rust");
  EXPECT_EQ(rust.setup, Strings{"cargo fetch"});
  EXPECT_EQ(rust.setup_allow, Strings{"preset:crates"});
}

TEST(TemplateDetectTest, JavaHasNoSetupAndSaysWhy) {
  for (const char* marker : {"pom.xml", "build.gradle", "build.gradle.kts"}) {
    ProjectTemplate t = Workspace({marker}).Detect();
    EXPECT_EQ(t.preset, "java") << marker;
    EXPECT_THAT(t.setup, IsEmpty()) << marker;
    EXPECT_THAT(t.setup_allow, IsEmpty()) << marker;
    EXPECT_THAT(t.detected, ElementsAre(marker));
    ASSERT_EQ(t.notes.size(), 1u) << marker;
    EXPECT_THAT(t.notes[0], HasSubstr("Maven Central has no egress preset yet"));
  }
}

TEST(TemplateDetectTest, SeveralEcosystemsMakeFullWithAllTheirSetup) {
  ProjectTemplate t = Workspace({"go.mod", "package.json", "Cargo.toml", "pom.xml"}).Detect();
  EXPECT_EQ(t.preset, "full");
  EXPECT_EQ(t.setup, (Strings{"npm install", "go mod download", "cargo fetch"}));
  EXPECT_EQ(t.setup_allow, (Strings{"preset:npm", "preset:go", "preset:crates"}));
  EXPECT_EQ(t.source, "auto (package.json, go.mod, Cargo.toml, pom.xml)");
  EXPECT_EQ(t.notes.size(), 1u);
}

TEST(TemplateDetectTest, NothingRecognised) {
  ProjectTemplate t = Workspace({"README.md", "Makefile"}).Detect();
  EXPECT_EQ(t.source, "auto");
  EXPECT_FALSE(t.preset.has_value());
  EXPECT_THAT(t.detected, IsEmpty());
  EXPECT_THAT(t.setup, IsEmpty());
  EXPECT_THAT(t.setup_allow, IsEmpty());
}

TEST(TemplateDetectTest, DoesNotFollowSymlinks) {
  TempDir outside;
  std::ofstream(outside.file("package.json")).put('{');
  Workspace w({});
  ASSERT_EQ(::symlink(outside.file("package.json").c_str(), w.dir().file("package.json").c_str()),
            0);
  ASSERT_EQ(::symlink(outside.path().c_str(), w.dir().file("go.mod").c_str()), 0);
  ProjectTemplate t = w.Detect();
  EXPECT_FALSE(t.preset.has_value());
  EXPECT_THAT(t.detected, IsEmpty());
  ASSERT_EQ(t.notes.size(), 2u);
  EXPECT_EQ(t.notes[0],
            "package.json is a symbolic link, which auto-detection does not follow; it was "
            "ignored");
}

TEST(TemplateDetectTest, IgnoresDirectoriesNamedLikeMarkers) {
  Workspace w({});
  ASSERT_EQ(::mkdir(w.dir().file("Cargo.toml").c_str(), 0755), 0);
  EXPECT_FALSE(w.Detect().preset.has_value());
}

TEST(TemplateDetectTest, DoesNotReadLargeFiles) {
  Workspace w({"package.json"});
  // A 1 TiB sparse file: reading it would take forever; detection only looks at names.
  ASSERT_EQ(::truncate(w.dir().file("package.json").c_str(), off_t{1} << 40), 0);
  EXPECT_EQ(w.Detect().preset, "node");
}

TEST(TemplateDetectTest, ExplainsAMissingWorkspace) {
  TempDir dir;
  absl::StatusOr<ProjectTemplate> t = DetectTemplate(dir.file("gone"));
  EXPECT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("cannot open the workspace " + dir.file("gone") +
                        " to detect its template (--template auto)"));
}

}  // namespace
}  // namespace abox::tmpl
