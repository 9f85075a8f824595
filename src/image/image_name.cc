#include "src/image/image_name.h"

#include "absl/strings/str_cat.h"

namespace abox::image {

absl::Status ValidateImageName(const std::string& name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid image name '", name, "': ", why,
                     " (use 1-64 characters of a-z, 0-9, '.', '_', '-', starting with a letter "
                     "or digit)"));
  };
  if (name.empty() || name.size() > 64) {
    return bad("wrong length");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return bad("bad character");
    }
  }
  if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9'))) {
    return bad("bad first character");
  }
  return absl::OkStatus();
}

}  // namespace abox::image
