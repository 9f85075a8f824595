// Internal to host_tree.cc (resolving and reading) and host_tree_write.cc (atomic writes and
// removals): what both halves of HostTree share. Not for other code.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/base/unique_fd.h"
#include "src/workspace/host_tree.h"

namespace abox::workspace {

// The directory that holds a path's last component. `fd` is invalid when a directory on the
// way is missing (only when not creating); `blocked_by` names a non-directory on the way.
struct HostTree::Parent {
  base::UniqueFd fd;
  std::string leaf;
  std::string blocked_by;
};

namespace host_tree_internal {

// "fifo", "socket", "character device", "block device" or "special file".
[[nodiscard]] std::string TypeName(mode_t mode);

// `status` annotated with "<what> '<rel>'" (rel escaped).
[[nodiscard]] absl::Status Shown(absl::Status status, absl::string_view rel,
                                 absl::string_view what);

}  // namespace host_tree_internal
}  // namespace abox::workspace
