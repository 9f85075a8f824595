#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/image/image_build.h"

namespace abox::cli {

struct ImageBuildOptions {
  std::string name;  // empty: image::DefaultImageNameFor(preset)
  std::string preset = "developer";
  std::vector<std::string> packages;
  bool force = false;
  std::string guest_binary;         // hidden: another abox-guest binary (tests use a hostile one)
  std::vector<std::string> agents;  // --agent NAME[@VERSION]: coding agents to install
};

// "a,b c" -> {"a", "b", "c"}.
std::vector<std::string> SplitPackageList(const std::string& text);

// --preset's help: every preset with its summary.
std::string ImagePresetHelp();

// Builds (or confirms) an image, its progress on stderr. ImageBuild prints the result too.
[[nodiscard]] absl::StatusOr<image::BuildResult> BuildImageWithProgress(
    const ImageBuildOptions& options);
int ImageBuild(const ImageBuildOptions& options);
int ImageList(bool json);
int ImageVerify(const std::string& name);

}  // namespace abox::cli
