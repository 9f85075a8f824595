#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/testing/temp_dir.h"
#include "src/template/project_template.h"

namespace abox::tmpl {
namespace {

using ::abox::base::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

TEST(TemplateReadTest, NoFileIsNoTemplate) {
  TempDir dir;
  absl::StatusOr<std::optional<ProjectTemplate>> t = ReadTemplate(dir.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->has_value());
}

TEST(TemplateReadTest, ReadsAndParsesTheFile) {
  TempDir dir;
  WriteFile(dir.file(".abox.toml"), "preset = \"go\"\nsetup = [\"go mod download\"]\n");
  absl::StatusOr<std::optional<ProjectTemplate>> t = ReadTemplate(dir.path());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(t->has_value());
  EXPECT_EQ((*t)->source, ".abox.toml");
  EXPECT_EQ((*t)->preset, "go");
  EXPECT_EQ((*t)->setup, std::vector<std::string>{"go mod download"});
}

TEST(TemplateReadTest, PassesParseErrorsOn) {
  TempDir dir;
  WriteFile(dir.file(".abox.toml"), "[resources]\ncpus = 100\n");
  absl::StatusOr<std::optional<ProjectTemplate>> t = ReadTemplate(dir.path());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()),
              StartsWith(".abox.toml, line 2: resources.cpus = 100"));
}

TEST(TemplateReadTest, RefusesASymlinkPointingOutside) {
  TempDir outside;
  TempDir dir;
  WriteFile(outside.file("secret.toml"), "preset = \"go\"\n");
  ASSERT_EQ(::symlink(outside.file("secret.toml").c_str(), dir.file(".abox.toml").c_str()), 0);
  absl::StatusOr<std::optional<ProjectTemplate>> t = ReadTemplate(dir.path());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(),
            dir.file(".abox.toml") +
                " is a symbolic link; abox reads a template only from a regular file in the "
                "repository, so that a link cannot make it read a file outside: replace the link "
                "with the file itself");
}

TEST(TemplateReadTest, RefusesASymlinkEvenInsideTheRepository) {
  TempDir dir;
  WriteFile(dir.file("template.toml"), "preset = \"go\"\n");
  ASSERT_EQ(::symlink("template.toml", dir.file(".abox.toml").c_str()), 0);
  absl::StatusOr<std::optional<ProjectTemplate>> t = ReadTemplate(dir.path());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("is a symbolic link"));
}

TEST(TemplateReadTest, RefusesADirectoryAndAFifo) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.file(".abox.toml").c_str(), 0755), 0);
  absl::StatusOr<std::optional<ProjectTemplate>> t = ReadTemplate(dir.path());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr(".abox.toml is not a regular file (a directory)"));

  TempDir fifo_dir;
  ASSERT_EQ(::mkfifo(fifo_dir.file(".abox.toml").c_str(), 0644), 0);
  t = ReadTemplate(fifo_dir.path());  // must not wait for a writer
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("is not a regular file (a device, FIFO or socket)"));
}

TEST(TemplateReadTest, RefusesAnOversizedFileWithoutParsingIt) {
  TempDir dir;
  WriteFile(dir.file(".abox.toml"), std::string(64 * 1024 + 1, '#'));
  absl::StatusOr<std::optional<ProjectTemplate>> t = ReadTemplate(dir.path());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr(".abox.toml is 65537 bytes, larger than the 65536 bytes a template may "
                        "be"));
  // A sparse file claiming a huge size is refused by its size alone.
  TempDir sparse;
  WriteFile(sparse.file(".abox.toml"), "");
  ASSERT_EQ(::truncate(sparse.file(".abox.toml").c_str(), off_t{1} << 40), 0);
  t = ReadTemplate(sparse.path());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("larger than the 65536 bytes"));
}

TEST(TemplateReadTest, ExactlyTheLimitIsAccepted) {
  TempDir dir;
  WriteFile(dir.file(".abox.toml"), std::string(64 * 1024, '#'));
  absl::StatusOr<std::optional<ProjectTemplate>> t = ReadTemplate(dir.path());
  EXPECT_TRUE(t.ok()) << t.status();
}

TEST(TemplateReadTest, ExplainsAMissingWorkspace) {
  TempDir dir;
  absl::StatusOr<std::optional<ProjectTemplate>> t = ReadTemplate(dir.file("gone"));
  EXPECT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()),
              StartsWith("cannot open the workspace " + dir.file("gone") +
                         " to read its "
                         ".abox.toml (open("));
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("); check that it is a directory you can read"));
}

}  // namespace
}  // namespace abox::tmpl
