// The symlink check of an apply / pull plan (apply_plan.cc): where every symlink of the tree
// the plan leaves behind leads. Links are judged in that whole tree, the host's links and the
// plan's together, never one at a time from their own text: `a -> .` and `b -> a/..` are each
// harmless alone, and together `b` is the workspace's parent.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "src/workspace/apply.h"
#include "src/workspace/host_tree.h"

namespace abox::workspace {

// The changes of `plan` that make a symlink lead outside the workspace (or into a loop or a
// chain too long to follow), by path, each with why:
//   - a symlink the plan writes that resolves outside in the resulting tree;
//   - a change that makes one of the host's symlinks, which stayed inside before, resolve
//     outside (a host `b -> a/..` once the plan makes `a -> .`): the change is blamed, since
//     the host's link is the person's.
// A host symlink that already led outside before the plan is the person's choice and blames
// nothing. Reads the host tree's symlinks (HostTree::Symlinks), never writes.
[[nodiscard]] absl::StatusOr<std::map<std::string, std::string>> SymlinkEscapes(
    const HostTree& tree, const ApplyPlan& plan);

}  // namespace abox::workspace
