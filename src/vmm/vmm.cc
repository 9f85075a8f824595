#include "src/vmm/vmm.h"

#include "absl/strings/str_cat.h"

namespace abox::vmm {

const char* AccelName(Accel accel) {
  switch (accel) {
    case Accel::kKvm:
      return "kvm";
    case Accel::kTcg:
      return "tcg";
    case Accel::kAuto:
      break;
  }
  return "auto";
}

absl::StatusOr<Accel> ParseAccel(absl::string_view text) {
  if (text == "auto") {
    return Accel::kAuto;
  }
  if (text == "kvm") {
    return Accel::kKvm;
  }
  if (text == "tcg") {
    return Accel::kTcg;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown accelerator \"", text, "\"; use auto, kvm or tcg"));
}

}  // namespace abox::vmm
