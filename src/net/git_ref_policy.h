// Which refs a sandbox may push to a forge through the git proxy (`abox create --git-push
// HOST/OWNER/REPO:BRANCH-PATTERN`), checked on the ref-update list of a push
// (ReceivePackCommandReader) before the forge sees it.
//
// Branch patterns name the part after "refs/heads/": `agent/*` (one path component: `*` never
// crosses '/'), `agent/**` (any depth), `fix-*`, `main`. Only branches are pushed by default:
// deleting any ref is refused (the forge's history is what a reviewer relies on), tags only
// when allowed and then only created (moving a tag rewrites what a release points to), any
// other ref (refs/notes, refs/for/, HEAD) never. A force push cannot be seen without reading
// the pack; protect the forge's own branches with its branch protection.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/net/pkt_line.h"

namespace abox::net {

struct RefPolicy {
  std::vector<std::string> branch_patterns;  // as above; empty: no branch may be pushed
  bool allow_tags = false;                   // creating refs/tags/* (never moving or deleting)
};

// InvalidArgument saying why `pattern` is not a branch pattern: empty, starts with
// "refs/" (write the part after refs/heads/), "***", or a ref name git would refuse.
[[nodiscard]] absl::Status ValidateBranchPattern(absl::string_view pattern);

// Whether `branch` (the part after refs/heads/) matches `pattern`: `*` matches any run of
// characters except '/', `**` any run including '/', everything else itself.
bool BranchGlobMatches(absl::string_view pattern, absl::string_view branch);

// The updates `policy` refuses, each with its reason, in the order of `updates`; empty when
// every update may go through.
std::vector<RefRefusal> CheckRefUpdates(const RefPolicy& policy,
                                        const std::vector<RefUpdate>& updates);

}  // namespace abox::net
