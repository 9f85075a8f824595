// Executing an apply / pull plan (apply.h): backups, journal, host writes, rollback on failure.
#include "src/workspace/apply.h"

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "src/base/status_macros.h"
#include "src/workspace/paths.h"

namespace abox::workspace {
namespace {

using Action = PlannedChange::Action;
using Kind = PathState::Kind;

constexpr std::pair<Action, const char*> kActionNames[] = {
    {Action::kWrite, "write"},
    {Action::kMerge, "merge"},
    {Action::kDelete, "delete"},
    {Action::kMode, "mode"},
    {Action::kSymlink, "symlink"},
    {Action::kMkdir, "mkdir"},
    {Action::kRmdir, "rmdir"},
    {Action::kConflict, "conflict"},
    {Action::kSkipExecFile, "exec-file"},
    {Action::kAlreadyDone, "already-done"},
};

// The message for a plan Apply refuses: each path with its reason, and what changes it. A
// pull names --force only for the conflicts --force resolves (PlannedChange::forceable).
absl::Status Refusal(const ApplyPlan& plan, const std::vector<const PlannedChange*>& blocking) {
  std::vector<std::string> conflicts;
  std::vector<std::string> stuck;  // conflicts --force does not resolve
  std::vector<std::string> exec_files;
  bool text_conflicts = false;
  size_t forceable = 0;
  for (const PlannedChange* c : blocking) {
    std::string line = absl::StrCat("  ", EscapePath(c->path), ": ", c->reason);
    if (c->action == Action::kSkipExecFile) {
      exec_files.push_back(std::move(line));
      continue;
    }
    conflicts.push_back(std::move(line));
    text_conflicts = text_conflicts || absl::StrContains(c->reason, "hunk");
    if (c->forceable) {
      ++forceable;
    } else {
      stuck.push_back(EscapePath(c->path));
    }
  }
  std::string msg = absl::StrCat(plan.kind, " refused; nothing was written.");
  if (!conflicts.empty()) {
    absl::StrAppend(&msg, "\nconflicts:\n", absl::StrJoin(conflicts, "\n"));
    if (plan.kind == "pull" && forceable > 0) {
      absl::StrAppend(&msg, "\nuse --force to take the sandbox's version ",
                      stuck.empty() ? "anyway" : "of the others",
                      " (the host's is backed up and `abox undo` restores it)");
    } else if (plan.kind != "pull") {
      absl::StrAppend(
          &msg, "\nresolve them, leave them out with explicit paths",
          text_conflicts ? ", or use --markers to write text conflicts with "
                           "conflict markers"
                         : "",
          forceable > 0 ? " (`abox pull --force <path>` takes the sandbox's version)" : "");
    }
    if (!stuck.empty()) {
      absl::StrAppend(&msg, "\n",
                      plan.kind != "pull"  ? "`abox pull --force` would not change "
                      : plan.options.force ? "--force does not change "
                                           : "--force would not change ",
                      absl::StrJoin(stuck, ", "),
                      ": move what is in the way on the host first, or leave ",
                      stuck.size() == 1 ? "it" : "them", " out with explicit paths");
    }
  }
  if (!exec_files.empty()) {
    absl::StrAppend(&msg,
                    "\nfiles that make code run outside the sandbox (read them first, then use ",
                    plan.kind == "pull" ? "`abox apply --allow-exec-files <path>`; pull never "
                                          "writes them"
                                        : "--allow-exec-files",
                    "):\n", absl::StrJoin(exec_files, "\n"));
  }
  return absl::FailedPreconditionError(msg);
}

std::vector<JournalEntry> EntriesFor(const ApplyPlan& plan) {
  std::vector<JournalEntry> entries;
  for (const PlannedChange& c : plan.changes) {
    if (c.Writes()) {
      entries.push_back({c.path, c.host, c.result, {}});
    }
  }
  return entries;
}

// Fills each entry's created_dirs: ancestors the host lacks that no entry itself creates.
absl::Status RecordCreatedDirs(const HostTree& tree, std::vector<JournalEntry>& entries) {
  std::set<std::string> entry_paths;
  for (const JournalEntry& e : entries) {
    entry_paths.insert(e.path);
  }
  std::set<std::string> assigned;
  for (JournalEntry& e : entries) {
    if (e.after.kind == Kind::kAbsent) {
      continue;
    }
    for (size_t slash = e.path.find('/'); slash != std::string::npos;
         slash = e.path.find('/', slash + 1)) {
      std::string anc = e.path.substr(0, slash);
      if (entry_paths.count(anc) != 0 || assigned.count(anc) != 0) {
        continue;
      }
      ABOX_ASSIGN_OR_RETURN(HostState host, tree.Read(anc));
      if (host.kind != HostState::Kind::kDir) {
        e.created_dirs.push_back(anc);
        assigned.insert(anc);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool PlannedChange::Writes() const {
  switch (action) {
    case Action::kWrite:
    case Action::kMerge:
    case Action::kDelete:
    case Action::kMode:
    case Action::kSymlink:
    case Action::kMkdir:
    case Action::kRmdir:
      return true;
    case Action::kConflict:
      return markers;
    case Action::kSkipExecFile:
    case Action::kAlreadyDone:
      return false;
  }
  return false;
}

absl::string_view ActionName(Action action) {
  for (const auto& [a, name] : kActionNames) {
    if (a == action) {
      return name;
    }
  }
  return "?";
}

std::vector<const PlannedChange*> ApplyPlan::Blocking() const {
  std::vector<const PlannedChange*> out;
  for (const PlannedChange& c : changes) {
    bool blocks = c.action == Action::kSkipExecFile ||
                  (c.action == Action::kConflict && options.conflicts == ConflictMode::kRefuse);
    if (blocks) {
      out.push_back(&c);
    }
  }
  return out;
}

bool ApplyPlan::has_conflicts() const {
  for (const PlannedChange& c : changes) {
    if (c.action == Action::kConflict) {
      return true;
    }
  }
  return false;
}

size_t ApplyPlan::writes() const {
  size_t n = 0;
  for (const PlannedChange& c : changes) {
    n += c.Writes() ? 1 : 0;
  }
  return n;
}

absl::StatusOr<ApplyResult> Apply(HostTree& tree, const ApplyPlan& plan, const ObjectStore& objects,
                                  ArtifactStore& artifacts, const ArtifactMeta& meta) {
  if (std::vector<const PlannedChange*> blocking = plan.Blocking(); !blocking.empty()) {
    return Refusal(plan, blocking);
  }
  ApplyResult result;
  result.dry_run = plan.options.dry_run;
  for (const PlannedChange& c : plan.changes) {
    if (c.action == Action::kConflict && !c.markers) {
      result.unresolved.push_back(
          absl::StrCat(EscapePath(c.path), ": ", c.reason, " (kept the host's version)"));
    }
  }
  std::vector<JournalEntry> entries = EntriesFor(plan);
  if (plan.options.dry_run || entries.empty()) {
    return result;
  }
  // The host may have moved since planning: everything must still be as planned.
  std::vector<std::string> moved;
  for (const JournalEntry& e : entries) {
    ABOX_ASSIGN_OR_RETURN(HostState host, tree.Read(e.path));
    if (PathState::FromHost(host) != e.before) {
      moved.push_back(EscapePath(e.path));
    }
  }
  if (!moved.empty()) {
    return absl::AbortedError(
        absl::StrCat("these paths changed on the host since the plan: ", absl::StrJoin(moved, ", "),
                     "; nothing was written, run it again"));
  }
  ABOX_RETURN_IF_ERROR(RecordCreatedDirs(tree, entries));

  ArtifactMeta artifact_meta = meta;
  artifact_meta.kind = plan.kind;
  if (artifact_meta.host_root.empty()) {
    artifact_meta.host_root = tree.root();
  }
  ABOX_ASSIGN_OR_RETURN(Artifact artifact, artifacts.Create(artifact_meta, absl::Now()));
  // Backups of what is replaced, and content abox made: fsynced before the journal says
  // "applying", so recovery always has what it needs.
  for (const JournalEntry& e : entries) {
    if (e.before.kind != Kind::kFile) {
      continue;
    }
    ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, tree.OpenFile(e.path));
    ABOX_ASSIGN_OR_RETURN(std::string sha, artifact.objects.PutFd(fd.get()));
    if (sha != e.before.sha256) {
      return absl::AbortedError(absl::StrCat("'", EscapePath(e.path),
                                             "' changed on the host while it was backed up; "
                                             "nothing was written, run it again"));
    }
  }
  for (const PlannedChange& c : plan.changes) {
    if (c.Writes() && !c.content.empty()) {
      ABOX_ASSIGN_OR_RETURN(std::string sha, artifact.objects.PutData(c.content));
      if (sha != c.result.sha256) {
        return absl::InternalError("merged content does not match its planned hash");
      }
    }
  }
  artifact.journal.entries = entries;
  artifact.journal.state = JournalState::kApplying;
  ABOX_RETURN_IF_ERROR(artifacts.Save(artifact));

  std::vector<const ObjectStore*> sources = {&artifact.objects, &objects};
  auto report = Converge(tree, entries, ConvergeTo::kAfter, /*force=*/false, sources,
                         plan.options.after_each_write);
  if (!report.ok()) {
    auto rollback = Converge(tree, entries, ConvergeTo::kBefore, /*force=*/false, sources);
    if (!rollback.ok()) {
      // Leave the journal "applying": recovery at the next start retries the rollback.
      return base::Annotate(
          report.status(),
          absl::StrCat(plan.kind, " failed part-way and the rollback failed too (",
                       rollback.status().message(), "); artifact ", artifact.journal.id,
                       " holds the backups and aboxd retries the rollback when it starts"));
    }
    artifact.journal.state = JournalState::kRolledBack;
    artifact.journal.notes.push_back(absl::StrCat("failed: ", report.status().message()));
    ABOX_RETURN_IF_ERROR(artifacts.Save(artifact));
    return base::Annotate(report.status(),
                          absl::StrCat(plan.kind, " failed and was rolled back (nothing changed)"));
  }
  for (const std::string& s : report->left_alone) {
    result.notes.push_back(absl::StrCat("not applied, changed on the host meanwhile: ", s));
  }
  std::set<std::string> kept(report->kept_dirs.begin(), report->kept_dirs.end());
  for (JournalEntry& e : artifact.journal.entries) {
    if (kept.count(e.path) != 0) {
      e.after = PathState::Dir();  // So undo sees the directory as this apply left it.
      result.notes.push_back(absl::StrCat("kept directory ", EscapePath(e.path),
                                          ": it holds files the sandbox does not know"));
    }
  }
  artifact.journal.notes = result.notes;
  artifact.journal.state = JournalState::kApplied;
  ABOX_RETURN_IF_ERROR(artifacts.Save(artifact));
  result.artifact_id = artifact.journal.id;
  result.written = entries.size();
  return result;
}

}  // namespace abox::workspace
