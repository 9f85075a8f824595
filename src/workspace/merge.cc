#include "src/workspace/merge.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "src/base/child_process.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::workspace {
namespace {

// Git's own binary heuristic (xdiff's buffer_is_binary): a NUL in the first 8000 bytes.
constexpr size_t kBinaryProbeBytes = 8000;

absl::Status WriteNew(const std::string& path, absl::string_view data) {
  base::UniqueFd fd(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("open(", path, ")"));
  }
  return base::WriteAll(fd.get(), {data.data(), data.size()});
}

absl::Status CheckLabel(absl::string_view label) {
  for (unsigned char c : label) {
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError("merge labels must not contain control characters");
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool LooksBinary(absl::string_view data) {
  return data.substr(0, kBinaryProbeBytes).find('\0') != absl::string_view::npos;
}

absl::StatusOr<MergeResult> MergeText(absl::string_view base, absl::string_view ours,
                                      absl::string_view theirs, const MergeLabels& labels) {
  if (LooksBinary(base) || LooksBinary(ours) || LooksBinary(theirs)) {
    return absl::InvalidArgumentError("binary content is not text-merged");
  }
  if (base.size() > kMaxMergeBytes || ours.size() > kMaxMergeBytes ||
      theirs.size() > kMaxMergeBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("files over ", kMaxMergeBytes, " bytes are not text-merged"));
  }
  ABOX_RETURN_IF_ERROR(CheckLabel(labels.ours));
  ABOX_RETURN_IF_ERROR(CheckLabel(labels.base));
  ABOX_RETURN_IF_ERROR(CheckLabel(labels.theirs));
  std::optional<std::string> git = base::FindExecutable("git");
  if (!git) {
    return absl::FailedPreconditionError(
        "git is not installed (abox uses `git merge-file` to merge text); install git");
  }

  // A private directory (0700) so no other user can swap the inputs.
  const char* tmpdir_env = ::getenv("TMPDIR");  // NOLINT(concurrency-mt-unsafe): read-only
  std::string tmp_root = tmpdir_env != nullptr && tmpdir_env[0] == '/' ? tmpdir_env : "/tmp";
  // RemoveUnder wants lexically normal paths ("/tmp/" -> "/tmp").
  tmp_root = std::filesystem::path(tmp_root).lexically_normal().string();
  while (tmp_root.size() > 1 && tmp_root.back() == '/') {
    tmp_root.pop_back();
  }
  std::string dir = tmp_root + "/abox-merge-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) {
    return base::ErrnoError(absl::StrCat("mkdtemp(", dir, ")"));
  }
  absl::Cleanup remove_dir = [&] {
    (void)base::RemoveUnder(std::filesystem::path(tmp_root), std::filesystem::path(dir));
  };
  std::string ours_path = dir + "/host";
  std::string base_path = dir + "/base";
  std::string theirs_path = dir + "/sandbox";
  ABOX_RETURN_IF_ERROR(WriteNew(ours_path, ours));
  ABOX_RETURN_IF_ERROR(WriteNew(base_path, base));
  ABOX_RETURN_IF_ERROR(WriteNew(theirs_path, theirs));
  std::string out_path = dir + "/out";
  std::string err_path = dir + "/err";
  base::UniqueFd out_fd(
      ::open(out_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  base::UniqueFd err_fd(
      ::open(err_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out_fd || !err_fd) {
    return base::ErrnoError("open(merge output)");
  }

  base::SpawnOptions spawn;
  // --diff3: see merge.h. -p: the result on stdout, the inputs stay as they are.
  spawn.argv = {*git,        "merge-file", "-p",          "--diff3", "-L",      labels.ours, "-L",
                labels.base, "-L",         labels.theirs, ours_path, base_path, theirs_path};
  // No system / global config (a merge.conflictStyle or a custom driver there must not change
  // what abox writes), no pager, C locale.
  spawn.env = std::vector<std::string>{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
                                       "HOME=/nonexistent", "LC_ALL=C", "PATH=/usr/bin:/bin"};
  spawn.stdin_fd = -1;
  spawn.stdout_fd = out_fd.get();
  spawn.stderr_fd = err_fd.get();
  spawn.cwd = dir;
  ABOX_ASSIGN_OR_RETURN(base::ChildProcess child, base::ChildProcess::Spawn(spawn));
  ABOX_ASSIGN_OR_RETURN(base::ExitStatus status, child.Wait());

  if (::lseek(err_fd.get(), 0, SEEK_SET) < 0) {
    return base::ErrnoError("lseek(merge stderr)");
  }
  std::string err = base::ReadAllFd(err_fd.get(), 4096).value_or("");
  // git merge-file exits with the number of conflicts (capped at 127), or -1 (255) on error.
  if (!status.exit_code || *status.exit_code < 0 || *status.exit_code > 127) {
    return absl::InternalError(
        absl::StrCat("git merge-file failed (", status.ToString(), "): ", err));
  }
  if (::lseek(out_fd.get(), 0, SEEK_SET) < 0) {
    return base::ErrnoError("lseek(merge output)");
  }
  MergeResult result;
  ABOX_ASSIGN_OR_RETURN(result.content, base::ReadAllFd(out_fd.get(), 3 * kMaxMergeBytes + 4096));
  result.conflicts = *status.exit_code;
  result.clean = result.conflicts == 0;
  return result;
}

}  // namespace abox::workspace
