#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace abox::base {

// Finds a companion binary of abox (e.g. "abox-guest", "abox-shim"): $<env_var> if set, else
// next to the running executable, else <exe dir>/../lib/abox/<name> (installed layout).
// kNotFound says where it looked.
[[nodiscard]] absl::StatusOr<std::string> FindCompanionBinary(const std::string& name,
                                                              const char* env_var);

}  // namespace abox::base
