// Image names, which become directory names under $ABOX_HOME/images.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace abox::image {

// Image names become directory names: 1-64 chars of [a-z0-9._-], starting with [a-z0-9].
[[nodiscard]] absl::Status ValidateImageName(const std::string& name);

}  // namespace abox::image
