#include "src/workspace/apply_states.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/workspace/host_tree.h"

namespace abox::workspace::apply_internal {

using Action = PlannedChange::Action;
using Kind = PathState::Kind;

bool HoldsBeneath(const Manifest* m, const std::string& path) {
  if (m == nullptr) {
    return false;
  }
  std::string prefix = absl::StrCat(path, "/");
  auto it = m->lower_bound(prefix);
  return it != m->end() && absl::StartsWith(it->first, prefix);
}

Action ActionFor(const PathState& from, const PathState& to) {
  switch (to.kind) {
    case Kind::kAbsent:
      return from.kind == Kind::kDir ? Action::kRmdir : Action::kDelete;
    case Kind::kDir:
      return Action::kMkdir;
    case Kind::kSymlink:
      return Action::kSymlink;
    case Kind::kFile:
      return from.kind == Kind::kFile && from.sha256 == to.sha256 ? Action::kMode : Action::kWrite;
    case Kind::kOther:
      break;
  }
  return Action::kAlreadyDone;
}

PathState AsLanded(PathState guest, const PathState& base, const PathState& host) {
  if (guest.kind != Kind::kFile) {
    return guest;
  }
  bool known = (base.kind == Kind::kFile && base.mode == guest.mode) ||
               (host.kind == Kind::kFile && host.mode == guest.mode);
  if (!known) {
    guest.mode = HostModeForSandboxFile(guest.mode);
  }
  return guest;
}

std::string Describe(const PathState& s) {
  switch (s.kind) {
    case Kind::kAbsent:
      return "deleted";
    case Kind::kFile:
      return "a file";
    case Kind::kSymlink:
      return "a symlink";
    case Kind::kDir:
      return "a directory";
    case Kind::kOther:
      return "a special file";
  }
  return "?";
}

}  // namespace abox::workspace::apply_internal
