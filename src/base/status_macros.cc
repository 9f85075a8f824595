#include "src/base/status_macros.h"

#include "absl/strings/str_cat.h"

namespace abox::base {

absl::Status ErrnoError(absl::string_view call, int err) { return absl::ErrnoToStatus(err, call); }

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) {
    return status;
  }
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace abox::base
