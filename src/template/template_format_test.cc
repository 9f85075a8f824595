#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/testing/temp_dir.h"
#include "src/template/project_template.h"

namespace abox::tmpl {
namespace {

using ::abox::base::testing::TempDir;
using ::testing::HasSubstr;

// `t` as ParseTemplate gives it back from FormatTemplate's text: what auto-detection alone
// knows (source, detected, notes) is only a comment there.
ProjectTemplate FileView(ProjectTemplate t) {
  t.source = ".abox.toml";
  t.detected.clear();
  t.notes.clear();
  return t;
}

TEST(TemplateFormatTest, FormatsTheDocumentedLayout) {
  ProjectTemplate t;
  t.source = ".abox.toml";
  t.preset = "node";
  t.packages = {"libpq-dev"};
  t.setup = {"npm ci"};
  t.cpus = 2;
  t.memory_mib = 4096;
  t.disk_mib = 1500;
  t.setup_allow = {"preset:npm"};
  EXPECT_EQ(FormatTemplate(t),
            "# abox project template (docs/templates.md); from .abox.toml\n"
            "preset = \"node\"\n"
            "packages = [\"libpq-dev\"]\n"
            "setup = [\"npm ci\"]\n"
            "\n[resources]\ncpus = 2\nmemory = \"4GiB\"\ndisk = 1500\n"
            "\n[egress]\nsetup_allow = [\"preset:npm\"]\n");
}

TEST(TemplateFormatTest, GoodFilesRoundTrip) {
  for (const char* text : {
           "",
           "image = \"developer\"\npreset = \"full\"\n",
           "setup = [\"echo \\\"quoted\\\" \\\\ back\\tslash\", \"printf 'caf\u00e9\\n'\"]\n",
           "[resources]\ncpus = 64\nmemory = 128\ndisk = \"1TiB\"\n",
           "[egress]\nallow = [\"api.example.com\", \"*.example.org:80,443\", \"preset:pypi\"]\n",
       }) {
    absl::StatusOr<ProjectTemplate> first = ParseTemplate(".abox.toml", text);
    ASSERT_TRUE(first.ok()) << text << ": " << first.status();
    std::string formatted = FormatTemplate(*first);
    absl::StatusOr<ProjectTemplate> again = ParseTemplate(".abox.toml", formatted);
    ASSERT_TRUE(again.ok()) << formatted << ": " << again.status();
    EXPECT_EQ(*again, *first) << formatted;
  }
}

TEST(TemplateFormatTest, DetectedTemplatesRoundTripWithTheirNotesAsComments) {
  TempDir dir;
  for (const char* name : {"package.json", "yarn.lock", "go.mod", "pom.xml"}) {
    FILE* f = std::fopen(dir.file(name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  absl::StatusOr<ProjectTemplate> detected = DetectTemplate(dir.path());
  ASSERT_TRUE(detected.ok()) << detected.status();
  std::string formatted = FormatTemplate(*detected);
  EXPECT_THAT(formatted, HasSubstr("# detected: package.json, yarn.lock, go.mod, pom.xml\n"));
  EXPECT_THAT(formatted, HasSubstr("# note: Maven Central has no egress preset yet"));
  absl::StatusOr<ProjectTemplate> again = ParseTemplate(".abox.toml", formatted);
  ASSERT_TRUE(again.ok()) << formatted << ": " << again.status();
  EXPECT_EQ(*again, FileView(*detected));
}

TEST(TemplateFormatTest, ALineBreakInASourceCannotStartAKey) {
  ProjectTemplate t;
  t.source = "x\nimage = \"evil\"";
  absl::StatusOr<ProjectTemplate> again = ParseTemplate(".abox.toml", FormatTemplate(t));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->image.has_value());
}

}  // namespace
}  // namespace abox::tmpl
