#include "src/secrets/placeholder.h"

#include <openssl/rand.h>

#include <array>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/secrets/secret.h"

namespace abox::secrets {

absl::StatusOr<std::string> NewPlaceholder(absl::string_view secret_name) {
  ABOX_RETURN_IF_ERROR(ValidateSecretName(secret_name));
  std::array<unsigned char, kPlaceholderRandomHex / 2> random{};
  if (RAND_bytes(random.data(), static_cast<int>(random.size())) != 1) {
    return absl::InternalError(
        "OpenSSL's random generator failed (RAND_bytes); no placeholder was made. Check that "
        "/dev/urandom (getrandom) works on this host");
  }
  std::string hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(random.data()), random.size()));
  return absl::StrCat(kPlaceholderPrefix, secret_name, "_", hex);
}

bool IsPlaceholder(absl::string_view text) {
  if (!absl::StartsWith(text, kPlaceholderPrefix) ||
      text.size() < kPlaceholderPrefix.size() + 2 + kPlaceholderRandomHex) {
    return false;
  }
  absl::string_view hex = text.substr(text.size() - kPlaceholderRandomHex);
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  absl::string_view rest = text.substr(0, text.size() - kPlaceholderRandomHex);
  if (!absl::EndsWith(rest, "_")) {
    return false;
  }
  absl::string_view name = rest.substr(kPlaceholderPrefix.size());
  name.remove_suffix(1);
  return ValidateSecretName(name).ok();
}

}  // namespace abox::secrets
