#include "src/workspace/artifacts.h"

#include <dirent.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/workspace/paths.h"

namespace abox::workspace {
namespace {

constexpr char kJournalName[] = "journal.json";

bool IsRemovable(PathState::Kind k) {
  return k == PathState::Kind::kFile || k == PathState::Kind::kSymlink;
}

// <yyyymmdd-hhmmss>-<6 hex>: digits, dashes and hex only, so an id from the API is never a path.
bool IsArtifactId(absl::string_view id) {
  if (id.size() != 22 || id[8] != '-' || id[15] != '-') {
    return false;
  }
  for (size_t i = 0; i < id.size(); ++i) {
    char c = id[i];
    if (i == 8 || i == 15) {
      continue;
    }
    bool ok = i < 15
                  ? absl::ascii_isdigit(static_cast<unsigned char>(c))
                  : (absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'));
    if (!ok) {
      return false;
    }
  }
  return true;
}

std::string ParentOf(absl::string_view rel) {
  size_t slash = rel.rfind('/');
  return slash == absl::string_view::npos ? "" : std::string(rel.substr(0, slash));
}

absl::Status WriteContent(HostTree& tree, const std::string& path, const PathState& target,
                          const std::vector<const ObjectStore*>& sources) {
  if (target.kind == PathState::Kind::kSymlink) {
    return tree.WriteSymlink(path, target.link_target);
  }
  for (const ObjectStore* store : sources) {
    if (store->Has(target.sha256)) {
      return tree.WriteObject(path, *store, target.sha256, target.mode);
    }
  }
  return absl::DataLossError(absl::StrCat("the content for '", EscapePath(path), "' (",
                                          target.sha256, ") is in none of abox's stores"));
}

}  // namespace

absl::StatusOr<PathState> ReadEntryState(const HostTree& tree, const std::string& path,
                                         const std::vector<JournalEntry>& entries) {
  auto host = tree.Read(path);
  if (absl::IsFailedPrecondition(host.status())) {
    // A symlink on the way that is itself one of the entries (the change replaced a directory
    // with a link): converging that entry first makes this path reachable, and until then it
    // holds nothing.
    for (const JournalEntry& e : entries) {
      if (path.size() > e.path.size() && path.compare(0, e.path.size(), e.path) == 0 &&
          path[e.path.size()] == '/' &&
          (e.before.kind == PathState::Kind::kSymlink ||
           e.after.kind == PathState::Kind::kSymlink || e.before.kind == PathState::Kind::kFile ||
           e.after.kind == PathState::Kind::kFile)) {
        return PathState::Absent();
      }
    }
  }
  ABOX_RETURN_IF_ERROR(host.status());
  return PathState::FromHost(*host);
}

absl::StatusOr<ConvergeReport> Converge(HostTree& tree, const std::vector<JournalEntry>& entries,
                                        ConvergeTo to, bool force,
                                        const std::vector<const ObjectStore*>& sources,
                                        const std::function<void(size_t)>& after_each_op) {
  struct Item {
    const JournalEntry* entry;
    const PathState* target;
    PathState cur;
    bool touch;
  };
  ConvergeReport report;
  auto done_one = [&] {
    ++report.operations;
    if (after_each_op) {
      after_each_op(report.operations);
    }
  };
  std::vector<Item> items;
  for (const JournalEntry& e : entries) {
    const PathState& target = to == ConvergeTo::kAfter ? e.after : e.before;
    const PathState& from = to == ConvergeTo::kAfter ? e.before : e.after;
    ABOX_ASSIGN_OR_RETURN(PathState cur, ReadEntryState(tree, e.path, entries));
    bool expected = cur == from || cur == target || cur.kind == PathState::Kind::kAbsent;
    bool touch = cur != target && cur.kind != PathState::Kind::kOther && (expected || force);
    if (cur != target && !touch) {
      report.left_alone.push_back(absl::StrCat(EscapePath(e.path), " (now ", cur.Describe(),
                                               "; expected ", from.Describe(), ")"));
    }
    items.push_back({&e, &target, std::move(cur), touch});
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.entry->path < b.entry->path; });

  // 1. Files and symlinks that must go (the target is nothing or a directory): deepest first.
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    if (it->touch && IsRemovable(it->cur.kind) &&
        (it->target->kind == PathState::Kind::kAbsent ||
         it->target->kind == PathState::Kind::kDir)) {
      ABOX_RETURN_IF_ERROR(tree.Remove(it->entry->path));
      it->cur = PathState::Absent();
      done_one();
    }
  }
  // 2. Directories that must go, deepest first (reverse order puts "a/b" before "a"). Toward
  // `before`, the directories the change created go too, with temp files a crash left.
  std::set<std::string> entry_dirs;
  std::set<std::string> created_dirs;
  for (Item& item : items) {
    if (item.touch && item.cur.kind == PathState::Kind::kDir &&
        item.target->kind != PathState::Kind::kDir) {
      entry_dirs.insert(item.entry->path);
    }
  }
  if (to == ConvergeTo::kBefore) {
    std::set<std::string> temp_dirs;
    for (const Item& item : items) {
      temp_dirs.insert(ParentOf(item.entry->path));
      for (const std::string& d : item.entry->created_dirs) {
        created_dirs.insert(d);
        temp_dirs.insert(d);
      }
    }
    for (const std::string& d : temp_dirs) {
      absl::Status s = tree.RemoveStaleTemps(d);
      // A directory on the way may be gone or replaced; then there is nothing to clean there.
      if (!s.ok() && !absl::IsNotFound(s) && !absl::IsFailedPrecondition(s)) {
        return s;
      }
    }
  }
  std::set<std::string> all_dirs = entry_dirs;
  all_dirs.insert(created_dirs.begin(), created_dirs.end());
  for (auto it = all_dirs.rbegin(); it != all_dirs.rend(); ++it) {
    ABOX_ASSIGN_OR_RETURN(PathState dir_state, ReadEntryState(tree, *it, entries));
    if (dir_state.kind != PathState::Kind::kDir) {
      continue;
    }
    absl::Status s = tree.RemoveEmptyDir(*it);
    if (absl::IsFailedPrecondition(s)) {
      report.kept_dirs.push_back(*it);  // Holds files abox did not put there.
      continue;
    }
    ABOX_RETURN_IF_ERROR(s);
    done_one();
    for (Item& item : items) {
      if (item.entry->path == *it) {
        item.cur = PathState::Absent();
      }
    }
  }
  // 3. Directories, shallowest first; 4. files and symlinks.
  for (Item& item : items) {
    if (item.touch && item.target->kind == PathState::Kind::kDir &&
        item.cur.kind != PathState::Kind::kDir) {
      ABOX_RETURN_IF_ERROR(tree.MakeDir(item.entry->path));
      item.cur = PathState::Dir();
      done_one();
    }
  }
  for (Item& item : items) {
    if (item.touch && IsRemovable(item.target->kind) && item.cur != *item.target) {
      ABOX_RETURN_IF_ERROR(WriteContent(tree, item.entry->path, *item.target, sources));
      item.cur = *item.target;
      done_one();
    }
  }
  return report;
}

absl::StatusOr<ArtifactStore> ArtifactStore::Open(const std::string& dir) {
  if (dir.empty() || dir.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact directory '", dir, "' must be an absolute path"));
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return base::ErrnoError(absl::StrCat("mkdir(", dir, ")"));
  }
  return ArtifactStore(dir);
}

absl::StatusOr<Artifact> ArtifactStore::Create(const ArtifactMeta& meta, absl::Time now) {
  unsigned char rnd[3] = {};
  if (::getrandom(rnd, sizeof(rnd), 0) != static_cast<ssize_t>(sizeof(rnd))) {
    return base::ErrnoError("getrandom");
  }
  std::string id = absl::StrCat(absl::FormatTime("%Y%m%d-%H%M%S", now, absl::UTCTimeZone()), "-",
                                absl::StrFormat("%02x%02x%02x", rnd[0], rnd[1], rnd[2]));
  std::string dir = absl::StrCat(dir_, "/", id);
  if (::mkdir(dir.c_str(), 0700) != 0) {
    return base::ErrnoError(absl::StrCat("mkdir(", dir, ")"));
  }
  ABOX_ASSIGN_OR_RETURN(ObjectStore objects, ObjectStore::Open(dir + "/objects"));
  Journal journal;
  journal.id = id;
  journal.sandbox = meta.sandbox;
  journal.host_root = meta.host_root;
  journal.kind = meta.kind;
  journal.created = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone());
  return Artifact{dir, std::move(journal), std::move(objects)};
}

absl::Status ArtifactStore::Save(const Artifact& artifact) const {
  return base::WriteFileAtomic(absl::StrCat(artifact.dir, "/", kJournalName),
                               SerializeJournal(artifact.journal), 0600);
}

absl::StatusOr<Artifact> ArtifactStore::Load(absl::string_view id) const {
  if (!IsArtifactId(id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", EscapePath(id.substr(0, 80)),
                     "' is not an artifact id (yyyymmdd-hhmmss-xxxxxx; see `abox apply --list`)"));
  }
  std::string dir = absl::StrCat(dir_, "/", id);
  auto text = base::ReadFile(absl::StrCat(dir, "/", kJournalName), 256 << 20);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(absl::StrCat("no artifact ", id, " in ", dir_));
    }
    return text.status();
  }
  ABOX_ASSIGN_OR_RETURN(Journal journal, ParseJournal(*text));
  ABOX_ASSIGN_OR_RETURN(ObjectStore objects, ObjectStore::Open(dir + "/objects"));
  return Artifact{dir, std::move(journal), std::move(objects)};
}

absl::StatusOr<std::vector<std::string>> ArtifactStore::Ids() const {
  std::vector<std::string> ids;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) {
    return base::ErrnoError(absl::StrCat("opendir(", dir_, ")"));
  }
  while (dirent* de = ::readdir(d)) {  // NOLINT(concurrency-mt-unsafe): private stream
    if (IsArtifactId(de->d_name)) {
      ids.emplace_back(de->d_name);
    }
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::StatusOr<std::vector<ArtifactSummary>> ArtifactStore::List() const {
  ABOX_ASSIGN_OR_RETURN(std::vector<std::string> ids, Ids());
  std::vector<ArtifactSummary> out;
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    ArtifactSummary summary;
    summary.id = *it;
    auto artifact = Load(*it);
    if (!artifact.ok()) {
      summary.state = absl::StrCat("damaged: ", artifact.status().message());
    } else {
      const Journal& j = artifact->journal;
      summary.created = j.created;
      summary.sandbox = j.sandbox;
      summary.host_root = j.host_root;
      summary.kind = j.kind;
      summary.state = std::string(JournalStateName(j.state));
      summary.files = j.entries.size();
    }
    out.push_back(std::move(summary));
  }
  return out;
}

absl::StatusOr<UndoResult> ArtifactStore::Undo(absl::string_view id, bool force,
                                               const HostTreeOptions& tree_options) {
  ABOX_ASSIGN_OR_RETURN(Artifact artifact, Load(id));
  Journal& j = artifact.journal;
  if (j.state != JournalState::kApplied) {
    return absl::FailedPreconditionError(absl::StrCat(
        "artifact ", id, " is ", JournalStateName(j.state),
        j.state == JournalState::kApplying ? " (interrupted; aboxd rolls it back when it starts)"
                                           : ", so there is nothing to undo"));
  }
  ABOX_ASSIGN_OR_RETURN(HostTree tree, HostTree::Open(j.host_root, tree_options));
  UndoResult result;
  result.id = j.id;
  std::vector<std::string> changed;
  for (const JournalEntry& e : j.entries) {
    ABOX_ASSIGN_OR_RETURN(PathState cur, ReadEntryState(tree, e.path, j.entries));
    if (cur == e.after || cur == e.before) {
      continue;  // As the change left it, or already restored by an interrupted undo.
    }
    changed.push_back(absl::StrCat(EscapePath(e.path), " (now ", cur.Describe(), ")"));
    if (force && cur.kind == PathState::Kind::kFile) {
      // Forced: keep what is about to be overwritten, so the person can still get it back.
      ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, tree.OpenFile(e.path));
      ABOX_ASSIGN_OR_RETURN(std::string sha, artifact.objects.PutFd(fd.get()));
      result.notes.push_back(absl::StrCat("undo overwrote ", EscapePath(e.path),
                                          "; its content was saved as ",
                                          artifact.objects.PathOf(sha)));
    }
  }
  if (!changed.empty() && !force) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to undo ", id, ": these paths changed since it was applied:\n  ",
        absl::StrJoin(changed, "\n  "),
        "\nundo would overwrite those changes; rerun with --force to undo anyway (the current "
        "content is saved in the artifact first)"));
  }
  ABOX_ASSIGN_OR_RETURN(ConvergeReport report,
                        Converge(tree, j.entries, ConvergeTo::kBefore, force, {&artifact.objects}));
  result.restored = report.operations;
  for (const std::string& s : report.left_alone) {
    result.notes.push_back(absl::StrCat("left alone: ", s));
  }
  for (const std::string& d : report.kept_dirs) {
    result.notes.push_back(absl::StrCat("kept non-empty directory ", EscapePath(d)));
  }
  j.notes.insert(j.notes.end(), result.notes.begin(), result.notes.end());
  j.state = JournalState::kUndone;
  ABOX_RETURN_IF_ERROR(Save(artifact));
  return result;
}

absl::StatusOr<std::vector<std::string>> ArtifactStore::RecoverInterrupted(
    const HostTreeOptions& tree_options) {
  ABOX_ASSIGN_OR_RETURN(std::vector<std::string> ids, Ids());
  std::vector<std::string> recovered;
  for (const std::string& id : ids) {
    auto artifact = Load(id);
    if (!artifact.ok()) {
      // No journal: the apply died before writing it, so before any host write.
      if (absl::IsNotFound(artifact.status())) {
        continue;
      }
      return artifact.status();
    }
    Journal& j = artifact->journal;
    if (j.state != JournalState::kApplying) {
      continue;
    }
    ABOX_ASSIGN_OR_RETURN(HostTree tree, HostTree::Open(j.host_root, tree_options));
    auto report =
        Converge(tree, j.entries, ConvergeTo::kBefore, /*force=*/false, {&artifact->objects});
    if (!report.ok()) {
      return base::Annotate(report.status(),
                            absl::StrCat("cannot roll back the interrupted apply ", id, " in ",
                                         j.host_root, " (its backups are in ", artifact->dir, ")"));
    }
    for (const std::string& s : report->left_alone) {
      j.notes.push_back(absl::StrCat("recovery left alone: ", s));
    }
    for (const std::string& d : report->kept_dirs) {
      j.notes.push_back(absl::StrCat("recovery kept non-empty directory ", EscapePath(d)));
    }
    j.state = JournalState::kRolledBack;
    ABOX_RETURN_IF_ERROR(Save(*artifact));
    recovered.push_back(id);
  }
  return recovered;
}

}  // namespace abox::workspace
