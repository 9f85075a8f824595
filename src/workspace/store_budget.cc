#include "src/workspace/store_budget.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::workspace {
namespace {

constexpr char kRefusalPayloadUrl[] = "abox.dev/workspace/storage-refusal";

absl::StatusOr<uint64_t> StatvfsFree(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("statvfs(", dir, ")"), errno);
  }
  return uint64_t{st.f_bavail} * st.f_frsize;
}

// MiB, rounded up; bytes below one.
std::string Mib(uint64_t bytes) {
  if (bytes < (uint64_t{1} << 20)) {
    return absl::StrCat(bytes, " bytes");
  }
  return absl::StrCat((bytes + (uint64_t{1} << 20) - 1) >> 20, " MiB");
}

absl::Status Refuse(std::string message) {
  absl::Status s = absl::ResourceExhaustedError(std::move(message));
  s.SetPayload(kRefusalPayloadUrl, absl::Cord("1"));
  return s;
}

}  // namespace

bool IsStorageRefusal(const absl::Status& status) {
  return status.GetPayload(kRefusalPayloadUrl).has_value();
}

absl::Status CollectObjects(WorkspaceState& state, const std::set<std::string>& also_keep) {
  ABOX_ASSIGN_OR_RETURN(std::set<std::string> keep, state.ReferencedObjects());
  keep.insert(also_keep.begin(), also_keep.end());
  return state.objects().Retain(keep);
}

absl::Status MakeRoomForGuestContent(WorkspaceState& state, const std::set<std::string>& guest_now,
                                     const Manifest& wanted, const StoreBudget& budget) {
  ABOX_ASSIGN_OR_RETURN(std::set<std::string> referenced, state.ReferencedObjects());
  std::set<std::string> keep = referenced;
  keep.insert(guest_now.begin(), guest_now.end());
  ABOX_RETURN_IF_ERROR(state.objects().Retain(keep));

  // What the guest's content already takes: the objects kept only because the guest has them.
  uint64_t held = 0;
  for (const std::string& sha : guest_now) {
    if (referenced.contains(sha)) {
      continue;
    }
    struct stat st {};
    if (::lstat(state.objects().PathOf(sha).c_str(), &st) == 0) {
      held += static_cast<uint64_t>(st.st_size);
    }
  }
  // What the fetch can add at most: each distinct object, up to its claimed size.
  uint64_t need = 0;
  std::set<std::string> counted;
  for (const auto& [path, e] : wanted) {
    if (counted.insert(e.sha256).second) {
      need += e.size;
    }
  }
  if (need == 0) {
    return absl::OkStatus();
  }
  if (held + need > budget.guest_bytes) {
    return Refuse(absl::StrCat(
        "the sandbox's changed files come to ", Mib(held + need), " (", Mib(need),
        " still to fetch), more than the ", Mib(budget.guest_bytes),
        " a sandbox's workspace may keep on the host (aboxd --workspace-quota); name fewer "
        "paths, delete large or generated files in the sandbox (or add them to .gitignore), "
        "or raise the quota"));
  }
  ABOX_ASSIGN_OR_RETURN(uint64_t free_bytes, budget.free_bytes ? budget.free_bytes(state.dir())
                                                               : StatvfsFree(state.dir()));
  if (free_bytes < need || free_bytes - need < budget.min_free_bytes) {
    return Refuse(absl::StrCat("fetching the sandbox's changed files needs up to ", Mib(need),
                               " but the disk holding ", state.dir(), " has ", Mib(free_bytes),
                               " free and aboxd keeps ", Mib(budget.min_free_bytes),
                               " of it free; free disk space, or name fewer paths"));
  }
  return absl::OkStatus();
}

}  // namespace abox::workspace
