#include "src/workspace/apply_symlinks.h"

#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/workspace/exec_files.h"
#include "src/workspace/paths.h"

namespace abox::workspace {
namespace {

// Components looked at over the whole check. Honest trees use a tiny fraction (a link is a few
// components and hops); a hostile plan of thousands of maximal chains stops here instead of
// keeping the daemon busy.
constexpr size_t kMaxSteps = size_t{16} << 20;

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> SymlinkEscapes(const HostTree& tree,
                                                                  const ApplyPlan& plan) {
  ABOX_ASSIGN_OR_RETURN(HostSymlinks host, tree.Symlinks());
  // What the plan leaves at each path it covers, as far as links go: the target, or nullopt
  // for anything else (a file, a directory, nothing). A change that writes nothing leaves the
  // host's state, which its result already says.
  std::map<std::string, std::optional<std::string>, std::less<>> planned;
  for (const PlannedChange& c : plan.changes) {
    planned.emplace(c.path, c.result.kind == PathState::Kind::kSymlink
                                ? std::optional<std::string>(c.result.link_target)
                                : std::nullopt);
  }
  auto host_link = [&](absl::string_view path) -> const std::string* {
    auto it = host.find(path);
    return it == host.end() ? nullptr : &it->second;
  };
  // Planned paths whose link state differs from the host's, met by the current walk.
  std::set<std::string> touched;
  auto after_link = [&](absl::string_view path) -> const std::string* {
    auto it = planned.find(path);
    if (it == planned.end()) {
      return host_link(path);
    }
    const std::string* before = host_link(path);
    const std::string* after = it->second ? &*it->second : nullptr;
    bool same = (before == nullptr && after == nullptr) ||
                (before != nullptr && after != nullptr && *before == *after);
    if (!same) {
      touched.insert(it->first);
    }
    return after;
  };

  std::map<std::string, std::string> out;
  size_t steps = kMaxSteps;
  for (const PlannedChange& c : plan.changes) {
    if (!c.Writes() || c.result.kind != PathState::Kind::kSymlink) {
      continue;
    }
    ABOX_ASSIGN_OR_RETURN(SymlinkWalk walk,
                          ResolveSymlink(c.path, c.result.link_target, after_link, &steps));
    if (walk.escape) {
      out.emplace(c.path, *walk.escape);
    }
  }
  for (const auto& [path, target] : host) {
    if (planned.contains(path)) {
      continue;  // Replaced, removed or kept by the plan: judged above when it stays a link.
    }
    touched.clear();
    ABOX_ASSIGN_OR_RETURN(SymlinkWalk after, ResolveSymlink(path, target, after_link, &steps));
    if (!after.escape || touched.empty()) {
      continue;  // Inside, or resolved exactly as before the plan.
    }
    std::set<std::string> blamed = std::move(touched);
    ABOX_ASSIGN_OR_RETURN(SymlinkWalk before, ResolveSymlink(path, target, host_link, &steps));
    if (before.escape) {
      continue;  // It led outside before: the person's own link.
    }
    for (const std::string& p : blamed) {
      out.emplace(
          p, absl::StrCat("makes the host's symlink '", EscapePath(path), "' (-> ",
                          EscapePath(target), ") resolve outside the workspace: ", *after.escape));
    }
  }
  return out;
}

}  // namespace abox::workspace
