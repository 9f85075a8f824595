#include "src/image/image_presets.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/image/rootfs_build.h"

namespace abox::image {
namespace {

using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

TEST(ImagePresetsTest, DeveloperHasWhatAnAgentsFirstTaskNeeds) {
  absl::StatusOr<const ImagePreset*> dev = FindImagePreset("developer");
  ASSERT_TRUE(dev.ok()) << dev.status();
  EXPECT_THAT((*dev)->packages, IsSupersetOf({"build-essential",
                                              "make",
                                              "cmake",
                                              "pkg-config",
                                              "git",
                                              "python3-pip",
                                              "python3-venv",
                                              "nodejs",
                                              "npm",
                                              "ripgrep",
                                              "jq",
                                              "curl",
                                              "wget",
                                              "unzip",
                                              "zip",
                                              "patch",
                                              "xz-utils",
                                              "openssh-client",
                                              "less",
                                              "procps"}));
}

TEST(ImagePresetsTest, MinimalAddsNothingAndLanguagesBuildOnDeveloper) {
  absl::StatusOr<const ImagePreset*> minimal = FindImagePreset("minimal");
  ASSERT_TRUE(minimal.ok());
  EXPECT_TRUE((*minimal)->packages.empty());
  const ImagePreset* dev = *FindImagePreset("developer");
  for (const char* name : {"python", "node", "go", "rust", "java", "full"}) {
    absl::StatusOr<const ImagePreset*> p = FindImagePreset(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_THAT((*p)->packages, IsSupersetOf(dev->packages)) << name;
    EXPECT_GT((*p)->packages.size(), dev->packages.size()) << name;
    EXPECT_TRUE(std::is_sorted((*p)->packages.begin(), (*p)->packages.end())) << name;
  }
  const ImagePreset* full = *FindImagePreset("full");
  for (const char* name : {"python", "node", "go", "rust", "java"}) {
    EXPECT_THAT(full->packages, IsSupersetOf((*FindImagePreset(name))->packages)) << name;
  }
}

TEST(ImagePresetsTest, EveryPackageNamePassesTheBuildersValidation) {
  for (const ImagePreset& p : ImagePresets()) {
    RootfsInputs in;
    in.packages = PackageSet(p.packages);
    EXPECT_TRUE(ValidateRootfsInputs(in).ok()) << p.name << ": " << ValidateRootfsInputs(in);
  }
}

TEST(ImagePresetsTest, UnknownPresetNamesTheKnownOnes) {
  absl::StatusOr<const ImagePreset*> p = FindImagePreset("pyhton");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("unknown image preset 'pyhton'"));
  EXPECT_THAT(p.status().message(), HasSubstr("minimal, developer, python, node"));
}

TEST(ImagePresetsTest, DeveloperBuildsTheDefaultImage) {
  EXPECT_EQ(DefaultImageNameFor("developer"), "default");
  EXPECT_EQ(DefaultImageNameFor("minimal"), "minimal");
  EXPECT_EQ(DefaultImageNameFor("node"), "node");
}

}  // namespace
}  // namespace abox::image
