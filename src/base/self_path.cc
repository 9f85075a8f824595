#include "src/base/self_path.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace abox::base {

absl::StatusOr<std::string> FindCompanionBinary(const std::string& name, const char* env_var) {
  if (const char* v = std::getenv(env_var); v && *v) {  // NOLINT(concurrency-mt-unsafe)
    if (::access(v, X_OK) != 0) {
      return absl::NotFoundError(absl::StrCat("$", env_var, "=", v, " is not an executable"));
    }
    return std::string(v);
  }
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat("cannot resolve /proc/self/exe to find ", name));
  }
  std::filesystem::path dir = exe.parent_path();
  for (const auto& candidate : {dir / name, dir.parent_path() / "lib" / "abox" / name}) {
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate.string();
    }
  }
  return absl::NotFoundError(absl::StrCat(name, " not found next to ", exe.string(), " or in ",
                                          (dir.parent_path() / "lib" / "abox").string(), "; set $",
                                          env_var, " to its path"));
}

}  // namespace abox::base
