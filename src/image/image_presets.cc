#include "src/image/image_presets.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace abox::image {
namespace {

// Debian 12 (bookworm) package names. The developer list is issue 19's: a compiler and build
// tools, Python with pip and venv, Node with npm, the search and archive tools agents reach for,
// an SSH client for git, and editors. Setup commands run as root, so no sudo.
std::vector<std::string> DeveloperPackages() {
  return {"build-essential",
          "cmake",
          "pkg-config",
          "git",
          "python3",
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
          "nano",
          "vim-tiny",
          "procps",
          "file",
          "gnupg",
          "ca-certificates",
          "diffutils",
          "bzip2",
          "make",
          "tree",
          "sqlite3"};
}

std::vector<std::string> Plus(std::vector<std::string> base, const std::vector<std::string>& add) {
  base.insert(base.end(), add.begin(), add.end());
  std::sort(base.begin(), base.end());
  base.erase(std::unique(base.begin(), base.end()), base.end());
  return base;
}

std::vector<ImagePreset> MakePresets() {
  // Each language's own packages; "full" is their union.
  const std::vector<std::string> python = {"python3-dev", "python-is-python3", "pipx",
                                           "python3-setuptools", "python3-wheel"};
  const std::vector<std::string> node = {"yarnpkg"};
  const std::vector<std::string> go = {"golang-go"};
  const std::vector<std::string> rust = {"cargo", "rustc", "rustfmt", "rust-clippy"};
  // Debian 12's gradle is 4.4 (too old for most builds): projects use their ./gradlew, which
  // needs only the JDK and its distribution host.
  const std::vector<std::string> java = {"default-jdk-headless", "maven"};
  std::vector<std::string> all = Plus(Plus(Plus(Plus(python, node), go), rust), java);
  const std::vector<std::string> dev = DeveloperPackages();
  return {
      {kMinimalPreset, "abox's own needs only (bash, coreutils, git, python3, curl)", {}, {}},
      {kDeveloperPreset,
       "compilers and build tools, Python with pip and venv, Node with npm, ripgrep, jq, editors",
       Plus(dev, {}),
       {"debian"}},
      {"python",
       "developer + Python headers, pipx, setuptools, wheel",
       Plus(dev, python),
       {"pypi"}},
      {"node", "developer + yarn (classic)", Plus(dev, node), {"npm"}},
      {"go", "developer + Go", Plus(dev, go), {"go"}},
      {"rust", "developer + Rust (cargo, rustc, rustfmt, clippy)", Plus(dev, rust), {"crates"}},
      {"java", "developer + JDK (headless) and Maven", Plus(dev, java), {}},
      {"full",
       "developer + every language preset",
       Plus(dev, all),
       {"pypi", "npm", "go", "crates"}},
  };
}

}  // namespace

const std::vector<ImagePreset>& ImagePresets() {
  static const auto* presets = new std::vector<ImagePreset>(MakePresets());
  return *presets;
}

absl::StatusOr<const ImagePreset*> FindImagePreset(absl::string_view name) {
  std::vector<std::string> names;
  for (const ImagePreset& p : ImagePresets()) {
    if (p.name == name) {
      return &p;
    }
    names.push_back(p.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown image preset '", name, "': use one of ", absl::StrJoin(names, ", ")));
}

std::string DefaultImageNameFor(absl::string_view preset) {
  return preset == kDeveloperPreset ? "default" : std::string(preset);
}

}  // namespace abox::image
