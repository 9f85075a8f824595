// Planning for apply and pull (apply.h): reads the host tree, never writes it.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/workspace/apply.h"
#include "src/workspace/apply_states.h"
#include "src/workspace/apply_symlinks.h"
#include "src/workspace/exec_files.h"
#include "src/workspace/merge.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace {

using apply_internal::ActionFor;
using apply_internal::AsLanded;
using apply_internal::Describe;
using apply_internal::HoldsBeneath;
using Action = PlannedChange::Action;
using Kind = PathState::Kind;

enum class Policy {
  kMerge,     // apply: three-way
  kPull,      // take the sandbox's version; host changes since base conflict
  kPullForce  // take the sandbox's version regardless
};

struct Candidate {
  std::string path;
  PathState base;
  PathState guest;
};

bool Matches(absl::string_view path, absl::string_view filter) {
  return path == filter || (absl::StartsWith(path, filter) && path.size() > filter.size() &&
                            path[filter.size()] == '/');
}

class Planner {
 public:
  Planner(const HostTree& tree, const Manifest* base, const Manifest* guest,
          const ObjectStore& objects, const ApplyOptions& options, Policy policy)
      : tree_(tree),
        base_(base),
        guest_(guest),
        objects_(objects),
        options_(options),
        policy_(policy) {}

  absl::StatusOr<ApplyPlan> Run(std::vector<Candidate> candidates, absl::string_view kind) {
    // Guards first, over every candidate (filtered or not): one hostile name fails the plan.
    for (const Candidate& c : candidates) {
      ABOX_RETURN_IF_ERROR(HostTree::CheckPath(c.path));
    }
    for (const std::string& p : options_.paths) {
      ABOX_RETURN_IF_ERROR(ValidateRelativePath(p));
    }
    std::vector<bool> used(options_.paths.size(), false);
    ApplyPlan plan;
    plan.kind = std::string(kind);
    plan.options = options_;
    for (Candidate& c : candidates) {
      bool selected = options_.paths.empty();
      for (size_t i = 0; i < options_.paths.size(); ++i) {
        if (Matches(c.path, options_.paths[i])) {
          used[i] = true;
          selected = true;
        }
      }
      if (!selected) {
        continue;
      }
      ABOX_ASSIGN_OR_RETURN(PlannedChange change, Classify(c));
      plan.changes.push_back(std::move(change));
    }
    std::vector<std::string> unused;
    for (size_t i = 0; i < options_.paths.size(); ++i) {
      if (!used[i]) {
        unused.push_back(EscapePath(options_.paths[i]));
      }
    }
    if (!unused.empty()) {
      return absl::NotFoundError(absl::StrCat(
          "no sandbox changes under: ", absl::StrJoin(unused, ", "),
          " (see `abox diff` for what changed; paths are relative to the workspace root)"));
    }
    std::sort(plan.changes.begin(), plan.changes.end(),
              [](const PlannedChange& a, const PlannedChange& b) { return a.path < b.path; });
    ABOX_RETURN_IF_ERROR(CheckAncestors(plan));
    ABOX_RETURN_IF_ERROR(CheckReplacedDirs(plan));
    ABOX_RETURN_IF_ERROR(CheckContent(plan));
    // Where every symlink of the resulting tree leads, the host's and the plan's together.
    ABOX_ASSIGN_OR_RETURN(auto escapes, SymlinkEscapes(tree_, plan));
    for (PlannedChange& c : plan.changes) {
      std::optional<std::string> reason = ExecSensitiveReason(c.path);
      if (auto it = escapes.find(c.path); !reason && it != escapes.end()) {
        reason = it->second;
      }
      if (reason && c.Writes()) {
        c.exec_sensitive = true;
        if (!options_.allow_exec_files) {
          c.action = Action::kSkipExecFile;
          c.reason = *reason;
        }
      }
    }
    return plan;
  }

 private:
  absl::StatusOr<PathState> HostAt(const std::string& path) {
    auto it = host_cache_.find(path);
    if (it != host_cache_.end()) {
      return it->second;
    }
    ABOX_ASSIGN_OR_RETURN(HostState host, tree_.Read(path));
    PathState state = PathState::FromHost(host);
    host_cache_.emplace(path, state);
    return state;
  }

  // `forceable`: a pull --force would take the sandbox's version (PlannedChange::forceable).
  void Conflict(PlannedChange& c, std::string reason, bool forceable) {
    c.action = Action::kConflict;
    c.reason = std::move(reason);
    c.forceable = forceable;
    c.result = c.host;
    c.content.clear();
    c.markers = false;
  }

  void TakeGuest(PlannedChange& c) {
    c.action = ActionFor(c.host, c.guest);
    c.result = c.guest;
  }

  absl::StatusOr<PlannedChange> Classify(const Candidate& cand) {
    PlannedChange c;
    c.path = cand.path;
    c.base = cand.base;
    c.guest = cand.guest;
    // A path with entries beneath it was a directory at sync (base), or is one in the sandbox
    // (guest): a directory the sandbox replaced with a file is its change, not the host's.
    if (c.base.kind == Kind::kAbsent && HoldsBeneath(base_, c.path)) {
      c.base = PathState::Dir();
    }
    if (c.guest.kind == Kind::kAbsent && HoldsBeneath(guest_, c.path)) {
      c.guest = PathState::Dir();
    }
    auto host = HostAt(cand.path);
    if (absl::IsFailedPrecondition(host.status()) && Consistent(cand.path)) {
      // A symlink on the host where base or sandbox has a directory: the person replaced it.
      // Never followed; the change conflicts. (A manifest that invents such a path is hostile:
      // the error stands.)
      c.host = PathState{Kind::kOther, 0, "", ""};
      Conflict(c, std::string(host.status().message()), /*forceable=*/false);
      return c;
    }
    ABOX_RETURN_IF_ERROR(host.status());
    c.host = *host;
    c.guest = AsLanded(c.guest, c.base, c.host);
    c.result = c.host;
    if (c.host == c.guest) {
      c.action = Action::kAlreadyDone;
      return c;
    }
    if (c.host.kind == Kind::kOther) {
      Conflict(c,
               "the host has a special file (fifo, socket or device) here; abox replaces "
               "only files, symlinks and directories: move it away on the host",
               /*forceable=*/false);
      return c;
    }
    if (c.host == c.base || policy_ == Policy::kPullForce) {
      TakeGuest(c);
      return c;
    }
    if (policy_ == Policy::kPull) {
      Conflict(c,
               absl::StrCat("changed on the host since the sandbox was synced (host: ",
                            c.host.Describe(), "); pull --force overwrites it (backed up)"),
               /*forceable=*/true);
      return c;
    }
    ABOX_RETURN_IF_ERROR(MergeBoth(c));
    return c;
  }

  // True when every ancestor of `path` is a directory in the base or in the guest manifest
  // (what an honest scan lists).
  bool Consistent(const std::string& path) const {
    auto all_dirs = [&](const Manifest* m) {
      if (m == nullptr) {
        return false;
      }
      for (size_t slash = path.find('/'); slash != std::string::npos;
           slash = path.find('/', slash + 1)) {
        auto it = m->find(path.substr(0, slash));
        if (it == m->end() || it->second.type != EntryType::kDir) {
          return false;
        }
      }
      return true;
    };
    return all_dirs(base_) || all_dirs(guest_);
  }

  // Both sides changed `c` (apply). Regular files merge; the rest conflicts.
  absl::Status MergeBoth(PlannedChange& c) {
    bool files = c.host.kind == Kind::kFile && c.guest.kind == Kind::kFile &&
                 (c.base.kind == Kind::kFile || c.base.kind == Kind::kAbsent);
    if (!files) {
      Conflict(
          c,
          absl::StrCat(
              "both sides changed it: the host has ", Describe(c.host), ", the sandbox has ",
              Describe(c.guest),
              c.base.kind == Kind::kAbsent ? "" : " (it was " + Describe(c.base) + " at sync)"),
          /*forceable=*/true);
      return absl::OkStatus();
    }
    // Permission bits merge like a one-line file.
    uint32_t mode;
    if (c.base.kind == Kind::kFile && c.host.mode == c.base.mode) {
      mode = c.guest.mode;
    } else if ((c.base.kind == Kind::kFile && c.guest.mode == c.base.mode) ||
               c.host.mode == c.guest.mode) {
      mode = c.host.mode;
    } else {
      Conflict(c,
               absl::StrFormat("the mode changed on both sides (host %04o, sandbox %04o)",
                               c.host.mode, c.guest.mode),
               /*forceable=*/true);
      return absl::OkStatus();
    }
    if (c.host.sha256 == c.guest.sha256 ||
        (c.base.kind == Kind::kFile && c.guest.sha256 == c.base.sha256)) {
      c.result = PathState::File(mode, c.host.sha256);  // Only the mode to take.
      c.action = c.result == c.host ? Action::kAlreadyDone : Action::kMode;
      return absl::OkStatus();
    }
    if (c.base.kind == Kind::kFile && c.host.sha256 == c.base.sha256) {
      c.result = PathState::File(mode, c.guest.sha256);
      c.action = Action::kWrite;
      return absl::OkStatus();
    }
    std::string base_text;
    if (c.base.kind == Kind::kFile) {
      ABOX_ASSIGN_OR_RETURN(base_text, ReadObject(c.path, c.base.sha256, "the base"));
    }
    ABOX_ASSIGN_OR_RETURN(std::string guest_text,
                          ReadObject(c.path, c.guest.sha256, "the sandbox's version"));
    ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, tree_.OpenFile(c.path));
    auto host_text = base::ReadAllFd(fd.get(), kMaxMergeBytes);
    if (!host_text.ok() || guest_text.size() > kMaxMergeBytes ||
        base_text.size() > kMaxMergeBytes) {
      Conflict(c, "both sides changed it, and it is too large to merge", /*forceable=*/true);
      return absl::OkStatus();
    }
    if (Sha256Hex(*host_text) != c.host.sha256) {
      return absl::AbortedError(
          absl::StrCat("'", EscapePath(c.path), "' changed on the host while planning; retry"));
    }
    if (LooksBinary(base_text) || LooksBinary(*host_text) || LooksBinary(guest_text)) {
      Conflict(c, "both sides changed this binary file (binary files are never merged)",
               /*forceable=*/true);
      return absl::OkStatus();
    }
    ABOX_ASSIGN_OR_RETURN(MergeResult merged, MergeText(base_text, *host_text, guest_text));
    if (merged.clean) {
      c.action = Action::kMerge;
      c.reason = "merged the host's and the sandbox's edits";
    } else if (options_.conflicts == ConflictMode::kMarkers) {
      c.action = Action::kConflict;
      c.markers = true;
      c.reason = absl::StrCat(merged.conflicts, " conflicting hunk(s), written with markers");
    } else {
      Conflict(c, absl::StrCat("both sides edited it: ", merged.conflicts, " conflicting hunk(s)"),
               /*forceable=*/true);
      return absl::OkStatus();
    }
    c.result = PathState::File(mode, Sha256Hex(merged.content));
    c.content = std::move(merged.content);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ReadObject(const std::string& path, const std::string& sha,
                                         absl::string_view what) {
    auto data = objects_.Read(sha, kMaxMergeBytes + 1);
    if (absl::IsNotFound(data.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat("the content of ", what, " of '", EscapePath(path), "' (", sha,
                       ") is not in abox's store; fetch the sandbox's changes again"));
    }
    if (absl::IsResourceExhausted(data.status())) {
      return std::string(kMaxMergeBytes + 1, 'x');  // Caller sees "too large".
    }
    return data;
  }

  // A change that puts something at a path needs every ancestor to be (or become) a directory.
  absl::Status CheckAncestors(ApplyPlan& plan) {
    std::map<std::string, const PlannedChange*> by_path;
    for (const PlannedChange& c : plan.changes) {
      by_path[c.path] = &c;
    }
    for (PlannedChange& c : plan.changes) {
      if (!c.Writes() || c.result.kind == Kind::kAbsent) {
        continue;
      }
      for (size_t slash = c.path.find('/'); slash != std::string::npos;
           slash = c.path.find('/', slash + 1)) {
        std::string anc = c.path.substr(0, slash);
        PathState after;
        if (auto it = by_path.find(anc); it != by_path.end()) {
          after = it->second->result;
          if (it->second->action == Action::kConflict && !it->second->markers &&
              after.kind != Kind::kDir) {
            // The host keeps its version of the directory's path: nothing goes beneath it.
            Conflict(c, absl::StrCat("'", EscapePath(anc), "' is in conflict"),
                     it->second->forceable);
            break;
          }
        } else {
          ABOX_ASSIGN_OR_RETURN(after, HostAt(anc));
        }
        if (after.kind != Kind::kAbsent && after.kind != Kind::kDir) {
          Conflict(c,
                   absl::StrCat("'", EscapePath(anc), "' stays ", Describe(after),
                                " on the host, so nothing can go beneath it: move it away on "
                                "the host"),
                   /*forceable=*/false);
          break;
        }
      }
    }
    return absl::OkStatus();
  }

  // Host paths beneath directory `dir`, recursively.
  absl::Status HostSubtree(const std::string& dir, std::vector<std::string>* out) {
    ABOX_ASSIGN_OR_RETURN(std::vector<std::string> names, tree_.List(dir));
    for (const std::string& name : names) {
      std::string p = absl::StrCat(dir, "/", name);
      out->push_back(p);
      if (!HostTree::CheckPath(p).ok()) {
        continue;  // A nested .git or a name abox never touches: the person's; never read.
      }
      ABOX_ASSIGN_OR_RETURN(PathState s, HostAt(p));
      if (s.kind == Kind::kDir) {
        ABOX_RETURN_IF_ERROR(HostSubtree(p, out));
      }
    }
    return absl::OkStatus();
  }

  // A host directory replaced by a file or symlink must be emptied by the plan itself. What
  // the sync's base had beneath it goes with it: its files through their own changes, its
  // subdirectories (never listed: directories are implied) through an rmdir added here. A
  // path beneath it the host changed since the sync makes the change conflict, unless a pull
  // --force removes that too (backed up like every write). What abox never touches (a nested
  // .git, a special file) makes it conflict even then.
  absl::Status CheckReplacedDirs(ApplyPlan& plan) {
    std::map<std::string, const PlannedChange*> by_path;
    for (const PlannedChange& c : plan.changes) {
      by_path[c.path] = &c;
    }
    std::vector<PlannedChange> removals;
    for (PlannedChange& c : plan.changes) {
      bool replaced = c.guest.kind == Kind::kFile || c.guest.kind == Kind::kSymlink;
      if (c.host.kind != Kind::kDir || !replaced) {
        continue;
      }
      if (c.action == Action::kConflict && !c.markers && c.forceable) {
        // Would a pull --force get through? Not past what abox never touches.
        std::vector<std::string> under;
        ABOX_RETURN_IF_ERROR(HostSubtree(c.path, &under));
        for (const std::string& p : under) {
          if (std::optional<std::string> why = Unremovable(p)) {
            c.forceable = false;
            absl::StrAppend(&c.reason, "; the host keeps '", EscapePath(p), "' in it (", *why, ")");
            break;
          }
        }
        continue;
      }
      if (!c.Writes() || (c.result.kind != Kind::kFile && c.result.kind != Kind::kSymlink)) {
        continue;
      }
      std::vector<std::string> under;
      ABOX_RETURN_IF_ERROR(HostSubtree(c.path, &under));
      std::vector<PlannedChange> own;
      std::vector<std::string> kept;
      bool forceable = true;
      for (const std::string& p : under) {
        if (auto it = by_path.find(p); it != by_path.end()) {
          const PlannedChange& under_c = *it->second;
          if (!under_c.Writes() || under_c.result.kind != Kind::kAbsent) {
            bool conflict = under_c.action == Action::kConflict;
            kept.push_back(absl::StrCat("'", EscapePath(p), "'",
                                        conflict ? " (changed on the host since the sync)" : ""));
            forceable = forceable && conflict && under_c.forceable;
          }
          continue;
        }
        if (std::optional<std::string> why = Unremovable(p)) {
          kept.push_back(absl::StrCat("'", EscapePath(p), "' (", *why, ")"));
          forceable = false;
          continue;
        }
        ABOX_ASSIGN_OR_RETURN(PathState host, HostAt(p));
        bool synced_dir = host.kind == Kind::kDir && HoldsBeneath(base_, p);
        if (!synced_dir && policy_ != Policy::kPullForce) {
          kept.push_back(absl::StrCat("'", EscapePath(p), "' (not there at sync)"));
          continue;
        }
        PlannedChange gone;
        gone.path = p;
        gone.base = synced_dir ? PathState::Dir() : PathState::Absent();
        gone.host = host;
        gone.result = PathState::Absent();
        gone.action = ActionFor(host, gone.result);
        gone.reason = absl::StrCat(
            synced_dir ? "" : "on the host only; pull --force: ", "the sandbox replaced '",
            EscapePath(c.path), "' with ", Describe(c.guest));
        own.push_back(std::move(gone));
      }
      if (!kept.empty()) {
        std::string more = kept.size() > 1 ? absl::StrCat(" and ", kept.size() - 1, " more") : "";
        Conflict(c,
                 absl::StrCat("the sandbox replaced this directory with ", Describe(c.guest),
                              ", but the host keeps ", kept.front(), more, " in it"),
                 forceable);
        continue;
      }
      for (PlannedChange& r : own) {
        removals.push_back(std::move(r));
      }
    }
    for (PlannedChange& r : removals) {
      plan.changes.push_back(std::move(r));
    }
    std::sort(plan.changes.begin(), plan.changes.end(),
              [](const PlannedChange& a, const PlannedChange& b) { return a.path < b.path; });
    return absl::OkStatus();
  }

  // Why a pull --force cannot remove host path `p` beneath a replaced directory; nullopt
  // when it can (HostTree handles it and it is no special file).
  std::optional<std::string> Unremovable(const std::string& p) {
    if (base_ == nullptr) {
      return "a pull into another directory never removes it";
    }
    if (!HostTree::CheckPath(p).ok()) {
      return "abox never replaces it";
    }
    absl::StatusOr<PathState> host = HostAt(p);
    if (!host.ok() || host->kind == Kind::kOther) {
      return "abox never replaces it";
    }
    return std::nullopt;
  }

  // Every file a write needs is in the store (before anything is written).
  absl::Status CheckContent(const ApplyPlan& plan) {
    for (const PlannedChange& c : plan.changes) {
      if (c.Writes() && c.result.kind == Kind::kFile && c.content.empty() &&
          c.result.sha256 != c.host.sha256 && !objects_.Has(c.result.sha256)) {
        return absl::FailedPreconditionError(
            absl::StrCat("the sandbox's content of '", EscapePath(c.path), "' (", c.result.sha256,
                         ") is not in abox's store; fetch the sandbox's changes again"));
      }
    }
    return absl::OkStatus();
  }

  const HostTree& tree_;
  const Manifest* base_;  // null for a pull into another directory
  const Manifest* guest_;
  const ObjectStore& objects_;
  const ApplyOptions& options_;
  Policy policy_;
  std::map<std::string, PathState> host_cache_;
};

std::vector<Candidate> Changes(const Manifest& base, const Manifest& guest) {
  std::vector<Candidate> out;
  std::set<std::string> paths;
  for (const auto& [p, e] : base) {
    paths.insert(p);
  }
  for (const auto& [p, e] : guest) {
    paths.insert(p);
  }
  for (const std::string& p : paths) {
    auto b = base.find(p);
    auto g = guest.find(p);
    PathState bs = PathState::FromEntry(b == base.end() ? nullptr : &b->second);
    PathState gs = PathState::FromEntry(g == guest.end() ? nullptr : &g->second);
    if (bs != gs) {
      out.push_back({p, std::move(bs), std::move(gs)});
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<ApplyPlan> PlanApply(const HostTree& tree, const Manifest& base,
                                    const Manifest& guest, const ObjectStore& objects,
                                    const ApplyOptions& options) {
  return Planner(tree, &base, &guest, objects, options, Policy::kMerge)
      .Run(Changes(base, guest), "apply");
}

absl::StatusOr<ApplyPlan> PlanPull(const HostTree& tree, const Manifest& base,
                                   const Manifest& guest, const ObjectStore& objects,
                                   const ApplyOptions& options) {
  return Planner(tree, &base, &guest, objects, options,
                 options.force ? Policy::kPullForce : Policy::kPull)
      .Run(Changes(base, guest), "pull");
}

absl::StatusOr<ApplyPlan> PlanPullInto(const HostTree& tree, const Manifest& guest,
                                       const ObjectStore& objects, const ApplyOptions& options) {
  // No base in another directory: every sandbox path is "new"; existing host paths conflict
  // unless forced. Nothing is deleted there.
  std::vector<Candidate> candidates;
  for (const auto& [p, e] : guest) {
    candidates.push_back({p, PathState::Absent(), PathState::FromEntry(&e)});
  }
  return Planner(tree, nullptr, &guest, objects, options,
                 options.force ? Policy::kPullForce : Policy::kPull)
      .Run(std::move(candidates), "pull");
}

}  // namespace abox::workspace
