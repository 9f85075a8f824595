#pragma once

#include <string>
#include <vector>

namespace abox::cli {

struct ImageBuildOptions {
  std::string name = "default";
  std::vector<std::string> packages;
  bool force = false;
  std::string guest_binary;         // hidden: another abox-guest binary (tests use a hostile one)
  std::vector<std::string> agents;  // --agent NAME[@VERSION]: coding agents to install
};

// "a,b c" -> {"a", "b", "c"}.
std::vector<std::string> SplitPackageList(const std::string& text);

int ImageBuild(const ImageBuildOptions& options);
int ImageList(bool json);
int ImageVerify(const std::string& name);

}  // namespace abox::cli
