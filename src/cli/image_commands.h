#pragma once

#include <string>
#include <vector>

namespace abox::cli {

struct ImageBuildOptions {
  std::string name = "default";
  std::vector<std::string> packages;
  bool force = false;
  std::string agent;  // hidden: another agent binary (tests use a hostile one)
};

// "a,b c" -> {"a", "b", "c"}.
std::vector<std::string> SplitPackageList(const std::string& text);

int ImageBuild(const ImageBuildOptions& options);
int ImageList(bool json);
int ImageVerify(const std::string& name);

}  // namespace abox::cli
