// ReadTemplate: the workspace's .abox.toml, opened so that a link or a special file in the
// repository cannot make abox read something else (a file outside it, a FIFO that never ends).
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/template/project_template.h"
#include "src/template/template_values.h"

namespace abox::tmpl {

absl::StatusOr<base::UniqueFd> OpenWorkspace(const std::filesystem::path& dir,
                                             std::string_view purpose) {
  base::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    absl::Status error = base::ErrnoError(absl::StrCat("open(", dir.string(), ")"));
    return absl::Status(
        error.code(),
        absl::StrCat("cannot open the workspace ", dir.string(), " to ", std::string(purpose), " (",
                     error.message(), "); check that it is a directory you can read"));
  }
  return fd;
}

absl::StatusOr<std::optional<ProjectTemplate>> ReadTemplate(
    const std::filesystem::path& workspace_dir) {
  std::string shown = (workspace_dir / kTemplateFileName).string();
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd dir, OpenWorkspace(workspace_dir, "read its .abox.toml"));
  // O_NOFOLLOW: a link, even one that stays inside the repository, is refused rather than
  // resolved (checking where it points and then opening it would race a change to the link).
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat refuses it below.
  base::UniqueFd fd(::openat(dir.get(), std::string(kTemplateFileName).c_str(),
                             O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd) {
    int err = errno;
    if (err == ENOENT) {
      return std::nullopt;
    }
    if (err == ELOOP) {
      return absl::InvalidArgumentError(absl::StrCat(
          shown,
          " is a symbolic link; abox reads a template only from a regular file in the "
          "repository, so that a link cannot make it read a file outside: replace the link "
          "with the file itself"));
    }
    return base::Annotate(base::ErrnoError(absl::StrCat("open(", shown, ")"), err),
                          absl::StrCat(shown, " could not be opened; check its permissions"));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("fstat(", shown, ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        shown, " is not a regular file (",
        S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket",
        "); a template must be a plain file: remove it or put the template in its place"));
  }
  auto too_large = [&shown](int64_t bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, " is ", bytes > 0 ? absl::StrCat(bytes, " bytes, ") : "",
                     "larger than the ", kMaxTemplateBytes,
                     " bytes a template may be; keep long scripts in a file of their own "
                     "and run that from setup"));
  };
  if (st.st_size > static_cast<off_t>(kMaxTemplateBytes)) {
    return too_large(st.st_size);
  }
  absl::StatusOr<std::string> text = base::ReadAllFd(fd.get(), kMaxTemplateBytes);
  if (text.status().code() == absl::StatusCode::kResourceExhausted) {
    return too_large(0);  // it grew while being read
  }
  if (!text.ok()) {
    return base::Annotate(text.status(), absl::StrCat("reading ", shown));
  }
  ABOX_ASSIGN_OR_RETURN(ProjectTemplate parsed, ParseTemplate(kTemplateFileName, *text));
  return parsed;
}

}  // namespace abox::tmpl
