#include "src/workspace/guest_changes.h"

#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/byte_channel.h"
#include "src/base/status_macros.h"
#include "src/workspace/archive.h"
#include "src/workspace/git_command.h"
#include "src/workspace/paths.h"
#include "src/workspace/secret_patterns.h"

namespace abox::workspace {
namespace {

// A guest manifest may be large (a tree with node_modules) but not without bound.
constexpr size_t kMaxManifestBytes = size_t{512} << 20;

// Git's own state never comes back from a sandbox: not the root's .git, and not a nested one
// (`tools/.git/config` with core.fsmonitor runs a command on the host the next time a git-aware
// prompt looks at tools/), in any case (`.GIT` is `.git` on a case-insensitive file system).
// HostTree refuses to write such a path too; leaving them out of the view keeps an apply of
// the rest possible when the agent cloned a repository into the workspace.
bool Counts(const std::string& path, const Entry& e, const ExcludeRules& excludes) {
  return e.type != EntryType::kDir && !HasGitComponent(path) && !excludes.Match(path, false);
}

Manifest FilterView(const Manifest& m, const ExcludeRules& excludes) {
  Manifest out;
  for (const auto& [path, e] : m) {
    if (Counts(path, e, excludes)) {
      out.emplace(path, e);
    }
  }
  return out;
}

bool UnderAny(const std::string& path, const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes) {
    if (path == p || absl::StartsWith(path, absl::StrCat(p, "/"))) {
      return true;
    }
  }
  return false;
}

// New guest files that the host's .gitignore ignores (none when the host tree is not git).
absl::StatusOr<std::set<std::string>> GitIgnored(const std::string& root,
                                                 const std::vector<std::string>& added) {
  if (added.empty()) {
    return std::set<std::string>{};
  }
  ABOX_ASSIGN_OR_RETURN(GitResult inside, RunGit(root, {"rev-parse", "--is-inside-work-tree"}));
  if (inside.exit_code != 0 || !absl::StartsWith(inside.out, "true")) {
    return std::set<std::string>{};
  }
  std::string input;
  for (const std::string& path : added) {
    absl::StrAppend(&input, path, absl::string_view("\0", 1));
  }
  ABOX_ASSIGN_OR_RETURN(GitResult r, RunGit(root, {"check-ignore", "-z", "--stdin"}, input));
  if (r.exit_code > 1) {  // 1: nothing ignored
    return absl::InternalError(absl::StrCat("git check-ignore failed: ", r.err));
  }
  std::set<std::string> out;
  for (absl::string_view p : absl::StrSplit(r.out, '\0', absl::SkipEmpty())) {
    out.emplace(p);
  }
  return out;
}

// Takes the entries of a `ws pack` archive into the object store, each checked against what
// the guest's manifest promised.
class PackHandler final : public SyncArchiveHandler {
 public:
  PackHandler(ObjectStore& objects, const Manifest& wanted) : objects_(objects), wanted_(wanted) {}

  absl::Status OnDeletions(std::vector<std::string>) override {
    return absl::InvalidArgumentError("the guest's pack stream carries a deletion list");
  }

  absl::Status OnEntry(const std::string& rel, const Entry& e, EntryReader& data) override {
    auto it = wanted_.find(rel);
    if (it == wanted_.end()) {
      if (e.type == EntryType::kDir) {
        return absl::OkStatus();  // a parent of a wanted file
      }
      return absl::InvalidArgumentError(
          absl::StrCat("the guest sent '", EscapePath(rel), "', which was not asked for"));
    }
    if (!received_.insert(rel).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("the guest sent '", EscapePath(rel), "' twice"));
    }
    const Entry& want = it->second;
    if (e.type != want.type ||
        (e.type == EntryType::kSymlink && e.link_target != want.link_target)) {
      return Changed(rel);
    }
    if (e.type == EntryType::kFile) {
      absl::Status s = objects_.PutVerified(
          want.sha256, [&](char* buf, size_t len) { return data.Read(buf, len); }, want.size);
      if (absl::IsDataLoss(s) || absl::IsResourceExhausted(s)) {
        return Changed(rel);
      }
      ABOX_RETURN_IF_ERROR(s);
    }
    return absl::OkStatus();
  }

  [[nodiscard]] const std::set<std::string>& received() const { return received_; }

 private:
  static absl::Status Changed(const std::string& rel) {
    return absl::AbortedError(absl::StrCat("'", EscapePath(rel),
                                           "' changed in the sandbox while it was read; "
                                           "run the command again"));
  }

  ObjectStore& objects_;
  const Manifest& wanted_;
  std::set<std::string> received_;
};

// The pack streams straight from the tool into the archive reader (on its own thread, through
// a bounded channel): nothing of it is staged on disk, and a stream that goes wrong stops the
// tool at once instead of after it sent everything.
absl::Status FetchContent(WorkspaceState& state, GuestTools& tools, const Manifest& wanted) {
  if (wanted.empty()) {
    return absl::OkStatus();
  }
  std::string list;
  uint64_t expected = 0;
  for (const auto& [path, e] : wanted) {
    absl::StrAppend(&list, path, absl::string_view("\0", 1));
    expected += e.size + 1024;
  }
  // zstd never grows data by much; more than this is not the archive we asked for.
  const uint64_t limit = expected + expected / 8 + (1 << 20);
  uint64_t written = 0;
  base::ByteChannel channel;
  PackHandler handler(state.objects(), wanted);
  ArchiveLimits limits;
  limits.max_entries = wanted.size() * 2 + 16;
  absl::Status read;
  std::thread reader([&] {
    read = ReadSyncArchive([&](char* buf, size_t len) { return channel.Read(buf, len); }, limits,
                           handler);
    // After the archive's end, whatever else comes (within `limit`) is read and dropped.
    char sink[4096];
    while (read.ok()) {
      absl::StatusOr<size_t> n = channel.Read(sink, sizeof(sink));
      if (!n.ok() || *n == 0) {
        break;
      }
    }
    channel.CloseRead();
  });
  bool reader_gone = false;
  absl::Status ran = tools.Run(
      {"pack", state.binding().guest_path},
      [&](const GuestTools::WriteFn& write) { return write(list); },
      [&](absl::string_view out) -> absl::Status {
        written += out.size();
        if (written > limit) {
          return absl::OutOfRangeError("the guest's pack stream is larger than the files it packs");
        }
        absl::Status s = channel.Write(out);
        reader_gone = !s.ok();
        return s;
      });
  channel.CloseWrite();
  reader.join();
  // The tool's own failure (a deadline, a non-zero exit) says more than the truncated stream it
  // left; the reader's says more than "the reader stopped".
  if (!ran.ok() && !reader_gone) {
    return ran;
  }
  ABOX_RETURN_IF_ERROR(read);
  ABOX_RETURN_IF_ERROR(ran);
  for (const auto& [path, e] : wanted) {
    if (!handler.received().contains(path)) {
      return absl::AbortedError(absl::StrCat("'", EscapePath(path),
                                             "' went away in the sandbox while it was read; "
                                             "run the command again"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GuestChanges> FetchGuestChanges(WorkspaceState& state, GuestTools& tools,
                                               const std::vector<std::string>& paths,
                                               const StoreBudget& budget) {
  for (const std::string& p : paths) {
    ABOX_RETURN_IF_ERROR(ValidateRelativePath(p));
  }
  const Binding& binding = state.binding();
  std::string text;
  ABOX_RETURN_IF_ERROR(tools.Run({"manifest", binding.guest_path, "--cache", kGuestStatCache},
                                 nullptr, [&](absl::string_view out) -> absl::Status {
                                   if (text.size() + out.size() > kMaxManifestBytes) {
                                     return absl::OutOfRangeError(
                                         "the guest's workspace manifest is over 512 MiB");
                                   }
                                   text.append(out.data(), out.size());
                                   return absl::OkStatus();
                                 }));
  absl::StatusOr<Manifest> guest_all = ParseManifest(text);
  if (!guest_all.ok()) {
    return absl::Status(
        guest_all.status().code(),
        absl::StrCat("the sandbox sent a bad workspace manifest: ", guest_all.status().message()));
  }
  ABOX_ASSIGN_OR_RETURN(ExcludeRules excludes,
                        ExcludeRules::Create(binding.exclude_add, binding.exclude_remove));

  GuestChanges out;
  out.base = FilterView(state.base(), excludes);
  Manifest guest = FilterView(*guest_all, excludes);
  out.ignored = 0;
  for (const auto& [path, e] : *guest_all) {
    if (e.type == EntryType::kDir || state.base().contains(path) || IsUnderGitDir(path)) {
      continue;
    }
    // Left out and counted: secret-looking files, and nested repositories' git state (the
    // root's .git is the sandbox's own history, not counted).
    if (HasGitComponent(path) || excludes.Match(path, false)) {
      ++out.ignored;
    }
  }
  // New files the host's git ignores (build output, node_modules) are not the agent's work.
  std::vector<std::string> added;
  for (const auto& [path, e] : guest) {
    if (!out.base.contains(path)) {
      added.push_back(path);
    }
  }
  ABOX_ASSIGN_OR_RETURN(std::set<std::string> ignored, GitIgnored(binding.host_root, added));
  for (const std::string& path : ignored) {
    out.ignored += guest.erase(path);
  }
  // The content worth keeping from the guest: its files as they are now (all of them, also when
  // `paths` narrows this fetch, so a later full diff need not fetch them again).
  std::set<std::string> guest_now;
  for (const auto& [path, e] : guest) {
    if (e.type == EntryType::kFile) {
      guest_now.insert(e.sha256);
    }
  }

  if (!paths.empty()) {
    for (const std::string& p : paths) {
      bool known = false;
      for (const Manifest* m : {&out.base, &guest}) {
        auto it = m->lower_bound(p);
        known = known || (it != m->end() && UnderAny(it->first, {p}));
      }
      if (!known) {
        return absl::NotFoundError(absl::StrCat("'", EscapePath(p),
                                                "' is neither in the sandbox's workspace nor in "
                                                "the synced base"));
      }
    }
    std::erase_if(out.base, [&](const auto& kv) { return !UnderAny(kv.first, paths); });
    std::erase_if(guest, [&](const auto& kv) { return !UnderAny(kv.first, paths); });
  }
  out.changes = CompareManifests(out.base, guest);

  Manifest wanted;
  for (const auto* list : {&out.changes.added, &out.changes.modified}) {
    for (const std::string& path : *list) {
      const Entry& e = guest.at(path);
      if (e.type == EntryType::kFile && !state.objects().Has(e.sha256)) {
        wanted.emplace(path, e);
      }
    }
  }
  ABOX_RETURN_IF_ERROR(MakeRoomForGuestContent(state, guest_now, wanted, budget));
  ABOX_RETURN_IF_ERROR(FetchContent(state, tools, wanted));
  out.guest = std::move(guest);
  return out;
}

}  // namespace abox::workspace
