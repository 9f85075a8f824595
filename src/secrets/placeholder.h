// Placeholders: what a sandbox sees instead of a secret's value.
//
// Each sandbox gets its own placeholder for each secret it is given, so a placeholder seen on the
// wire names both, and one sandbox's placeholder is worthless in another. The random part comes
// from OpenSSL's CSPRNG: a guest cannot guess another sandbox's placeholder.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::secrets {

inline constexpr absl::string_view kPlaceholderPrefix = "ABOX_SECRET_";
// Hex digits after the name: 128 random bits.
inline constexpr size_t kPlaceholderRandomHex = 32;

// "ABOX_SECRET_<NAME>_<32 lower-case hex>" for a valid secret name (InvalidArgument otherwise);
// Internal when the CSPRNG fails.
[[nodiscard]] absl::StatusOr<std::string> NewPlaceholder(absl::string_view secret_name);

// True when `text` is exactly a placeholder of that form (any valid name).
[[nodiscard]] bool IsPlaceholder(absl::string_view text);

}  // namespace abox::secrets
