// What an image holds besides abox's own needs: a preset is a named list of Debian packages
// (`abox image build --preset NAME`). "developer" is what the default image is built from:
// what an agent's first task ("run the test suite and fix the failures") needs in most
// repositories. "minimal" is abox's own needs only, for fast throwaway runs. The language
// presets add an ecosystem's toolchain on top of "developer"; "full" is all of them.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::image {

inline constexpr char kDeveloperPreset[] = "developer";
inline constexpr char kMinimalPreset[] = "minimal";

struct ImagePreset {
  std::string name;
  std::string summary;                // one line for --help and `abox image presets`
  std::vector<std::string> packages;  // on top of kDefaultPackages, this preset's own included
  // Egress presets (src/net/policy.cc) the ecosystem's package manager needs, e.g. "npm".
  std::vector<std::string> egress;
};

// All presets, in a stable order: minimal, developer, then the languages, then full.
[[nodiscard]] const std::vector<ImagePreset>& ImagePresets();
// kInvalidArgument naming the known presets when `name` is none of them.
[[nodiscard]] absl::StatusOr<const ImagePreset*> FindImagePreset(absl::string_view name);

// The image name a preset builds by default: "default" for developer, the preset's name
// otherwise (so `--image python` finds what `abox image build --preset python` made).
[[nodiscard]] std::string DefaultImageNameFor(absl::string_view preset);

}  // namespace abox::image
