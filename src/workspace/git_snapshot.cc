#include "src/workspace/git_snapshot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"
#include "src/workspace/git_command.h"
#include "src/workspace/git_snapshot_internal.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace git_internal {

namespace fs = std::filesystem;
using nlohmann::json;

absl::StatusOr<GitSnapshot> Builder::Build() {
  ABOX_RETURN_IF_ERROR(ProbeHost());
  if (history_ == GitHistory::kFull && !host_.prefix.empty()) {
    // The history's trees are the whole worktree's; in a guest whose worktree is one directory
    // of it, every commit would delete everything else. A snapshot of that directory instead.
    history_ = GitHistory::kSnapshot;
    out_.notes.push_back(absl::StrCat(
        "git: the full history (--git-history) needs the workspace to be the top of its git "
        "worktree, and it is the subdirectory '",
        EscapePath(host_.prefix),
        "': the sandbox gets a snapshot of HEAD under it instead (bind the worktree's top "
        "directory for the history)"));
  }
  out_.dir = dir_;
  out_.host_head = host_.head;
  if (absl::StartsWith(host_.head_ref, "refs/heads/")) {
    out_.branch = host_.head_ref.substr(11);
  }
  ABOX_RETURN_IF_ERROR(Prepare());
  // The host's objects are borrowed (Borrow) only while objects are made; whatever
  // happens, the alternates file goes again, so nothing built here depends on it unnoticed.
  absl::Cleanup unborrow = [&] { (void)::unlink(Alternates().c_str()); };
  if (history_ == GitHistory::kSnapshot) {
    ABOX_RETURN_IF_ERROR(BuildSnapshot());
  } else {
    ABOX_RETURN_IF_ERROR(BuildFullHistory());
  }
  std::move(unborrow).Invoke();
  ABOX_RETURN_IF_ERROR(CopyInfoExclude());
  ABOX_RETURN_IF_ERROR(List());
  return std::move(out_);
}

absl::Status Builder::BuildSnapshot() {
  if (state_.host_head == host_.head && state_.head_ref == host_.head_ref &&
      (host_.head.empty() || !state_.commit.empty())) {
    out_.commit = state_.commit;
    out_.excluded = ExcludedOf(state_);
    return absl::OkStatus();  // HEAD has not moved: the last build still stands
  }
  ABOX_RETURN_IF_ERROR(CheckOldPacks());
  ABOX_RETURN_IF_ERROR(Borrow());
  std::string commit;
  if (!host_.head.empty()) {
    ABOX_ASSIGN_OR_RETURN(commit, MakeSnapshotCommit());
    if (commit != state_.commit) {
      ABOX_RETURN_IF_ERROR(Pack({commit}, state_.tips));
    }
  }
  ABOX_RETURN_IF_ERROR(RemoveLooseObjects());
  // Refs: just the branch, as the host's HEAD names it.
  ABOX_RETURN_IF_ERROR(RemoveIfExists(dir_, git_ + "/refs"));
  ABOX_RETURN_IF_ERROR(RemoveIfExists(dir_, git_ + "/packed-refs"));
  std::string head_file;
  if (absl::StartsWith(host_.head_ref, "refs/heads/") && IsWritableRefName(host_.head_ref)) {
    head_file = absl::StrCat("ref: ", host_.head_ref, "\n");
    if (!commit.empty()) {
      ABOX_RETURN_IF_ERROR(WriteIfChanged(absl::StrCat(git_, "/", host_.head_ref), commit + "\n"));
    }
  } else if (!commit.empty()) {
    head_file = commit + "\n";
    if (!host_.head_ref.empty()) {
      out_.notes.push_back(absl::StrCat("git: HEAD names ", EscapePath(host_.head_ref),
                                        ", not a branch: the sandbox's HEAD is detached"));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("HEAD names ", EscapePath(host_.head_ref),
                     ", which has no commit and is not a branch abox can recreate in the sandbox"));
  }
  for (const char* sub : {"/refs", "/refs/heads"}) {
    (void)::mkdir((git_ + sub).c_str(), 0755);
  }
  ABOX_RETURN_IF_ERROR(WriteIfChanged(git_ + "/HEAD", head_file));
  ABOX_RETURN_IF_ERROR(WriteIndex(commit));
  state_.host_head = host_.head;
  state_.head_ref = host_.head_ref;
  state_.commit = commit;
  if (!commit.empty()) {
    state_.tips = {commit};
  }
  ABOX_RETURN_IF_ERROR(SaveExcluded());
  ABOX_RETURN_IF_ERROR(SaveState(dir_ + "/" + kStateFile, state_));
  out_.commit = commit;
  out_.rebuilt = true;
  std::string where =
      out_.branch.empty() ? "a detached HEAD" : absl::StrCat("'", EscapePath(out_.branch), "'");
  if (commit.empty()) {
    out_.notes.push_back(absl::StrCat("git: ", where,
                                      " has no commit yet: the sandbox's "
                                      "repository is empty"));
  } else {
    if (!host_.prefix.empty()) {
      where = absl::StrCat("'", EscapePath(host_.prefix), "' in ", where);
    }
    out_.notes.push_back(
        absl::StrCat("git: the sandbox's repository is a snapshot of ", where, " at ",
                     Short(host_.head), " (one commit, no history",
                     out_.excluded.empty()
                         ? ""
                         : absl::StrCat(", ", out_.excluded.size(), " tracked path(s) left out"),
                     ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Builder::MakeSnapshotCommit() {
  // A subdirectory's snapshot is HEAD's tree at its path ("<head>:<path>"), so paths in it are
  // the workspace's, as the guest sees them.
  std::string tree_ish = host_.head;
  bool in_head = true;
  if (!host_.prefix.empty()) {
    tree_ish = absl::StrCat(host_.head, ":", absl::StripSuffix(host_.prefix, "/"));
    ABOX_ASSIGN_OR_RETURN(GitResult type, BuiltGit({"cat-file", "-t", tree_ish}, {}));
    if (type.exit_code != 0 && !absl::StrContains(type.err, "does not exist in")) {
      return MissingOrInternal("cat-file", type.err);  // not "no such path": objects missing
    }
    in_head = type.exit_code == 0 && absl::StripAsciiWhitespace(type.out) == "tree";
    if (!in_head) {
      out_.notes.push_back(absl::StrCat("git: HEAD has no directory '", EscapePath(host_.prefix),
                                        "': the sandbox's snapshot is empty (every file there "
                                        "shows as untracked)"));
    }
  }
  std::string listing;
  if (in_head) {
    ABOX_ASSIGN_OR_RETURN(listing, BuiltGitOk({"ls-tree", "-r", "-z", "--full-tree", tree_ish}));
  }
  std::string kept;
  kept.reserve(listing.size());
  for (absl::string_view record : absl::StrSplit(listing, '\0', absl::SkipEmpty())) {
    size_t tab = record.find('\t');
    if (tab == absl::string_view::npos) {
      return absl::InternalError("unexpected git ls-tree output (no tab)");
    }
    absl::string_view path = record.substr(tab + 1);
    if (std::optional<std::string> pattern = rules_.Match(path, false)) {
      out_.excluded.emplace_back(std::string(path), *pattern);
      continue;
    }
    absl::StrAppend(&kept, record, absl::string_view("\0", 1));
  }
  std::string index = dir_ + "/" + kBuildIndex;
  (void)::unlink(index.c_str());
  absl::Cleanup drop = [&] { (void)::unlink(index.c_str()); };
  GitOptions with_index;
  with_index.env = {absl::StrCat("GIT_INDEX_FILE=", index)};
  GitOptions fill = with_index;
  fill.input = kept;
  ABOX_RETURN_IF_ERROR(BuiltGitOk({"update-index", "-z", "--index-info"}, fill).status());
  ABOX_ASSIGN_OR_RETURN(std::string tree, BuiltGitOk({"write-tree"}, with_index));
  tree = std::string(absl::StripAsciiWhitespace(tree));
  ABOX_ASSIGN_OR_RETURN(std::string raw, BuiltGitOk({"cat-file", "commit", host_.head}));
  std::string date = "0 +0000";
  for (absl::string_view line : absl::StrSplit(raw, '\n')) {
    if (line.empty()) {
      break;  // end of the headers
    }
    if (absl::StartsWith(line, "committer ")) {
      size_t gt = line.rfind('>');
      if (gt != absl::string_view::npos) {
        date = std::string(absl::StripAsciiWhitespace(line.substr(gt + 1)));
      }
    }
  }
  std::string where =
      out_.branch.empty() ? "detached HEAD" : absl::StrCat("branch '", out_.branch, "'");
  std::string under;  // where in the host's worktree this tree is
  if (!host_.prefix.empty()) {
    where = absl::StrCat("'", EscapePath(host_.prefix), "' of ", where);
    under = absl::StrCat(" under '", EscapePath(host_.prefix), "'");
  }
  std::string message = absl::StrCat(
      "abox: snapshot of ", where, " at ", host_.head,
      "\n\nThis repository was built for the sandbox from the tree of the host's HEAD", under,
      ", without the\npaths abox keeps out of sandboxes (", out_.excluded.size(),
      " left out). The host's history, other branches, tags\nand stashes are not here.\n\n"
      "Abox-Host-Head: ",
      host_.head, "\n",
      host_.prefix.empty() ? "" : absl::StrCat("Abox-Host-Path: ", EscapePath(host_.prefix), "\n"));
  GitOptions commit_options;
  commit_options.input = message;
  const std::string name = "abox";
  const std::string email = "abox@localhost";
  commit_options.env = {"GIT_AUTHOR_NAME=" + name,      "GIT_AUTHOR_EMAIL=" + email,
                        "GIT_AUTHOR_DATE=" + date,      "GIT_COMMITTER_NAME=" + name,
                        "GIT_COMMITTER_EMAIL=" + email, "GIT_COMMITTER_DATE=" + date};
  ABOX_ASSIGN_OR_RETURN(std::string commit,
                        BuiltGitOk({"commit-tree", "--no-gpg-sign", tree}, commit_options));
  return std::string(absl::StripAsciiWhitespace(commit));
}

absl::Status Builder::SaveExcluded() {
  json j = json::array();
  for (const auto& [path, pattern] : out_.excluded) {
    j.push_back({path, pattern});
  }
  return base::WriteFileAtomic(dir_ + "/excluded.json",
                               j.dump(-1, ' ', false, json::error_handler_t::replace), 0600);
}

std::vector<std::pair<std::string, std::string>> Builder::ExcludedOf(const BuildState&) const {
  std::vector<std::pair<std::string, std::string>> out;
  absl::StatusOr<std::string> text = base::ReadFile(dir_ + "/excluded.json", size_t{64} << 20);
  if (!text.ok()) {
    return out;
  }
  json j = json::parse(*text, nullptr, false);
  if (!j.is_array()) {
    return out;
  }
  for (const json& e : j) {
    if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      out.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    }
  }
  return out;
}

absl::Status Builder::Pack(const std::vector<std::string>& tips,
                           const std::vector<std::string>& old) {
  std::string input;
  for (const std::string& tip : tips) {
    absl::StrAppend(&input, tip, "\n");
  }
  if (!old.empty()) {
    // An old tip's tree too: the walk only leaves out the trees of commits it meets on the
    // way, and a snapshot's commits share no history (without it, each new snapshot
    // would pack its whole tree again).
    absl::StrAppend(&input, "--not\n");
    for (const std::string& tip : old) {
      absl::StrAppend(&input, tip, "\n", tip, "^{tree}\n");
    }
  }
  std::vector<std::string> args = {"pack-objects", "--revs", "-q", "--delta-base-offset"};
  if (tips.empty()) {
    args.insert(args.end(), {"--all", "--reflog"});
  }
  args.push_back(git_ + "/objects/pack/pack");
  GitOptions options;
  options.input = input;
  ABOX_ASSIGN_OR_RETURN(std::string name, BuiltGitOk(args, options));
  name = std::string(absl::StripAsciiWhitespace(name));
  if (!IsObjectId(name)) {
    return absl::InternalError("unexpected git pack-objects output");
  }
  // A pack of nothing (only refs went away) is not worth a file.
  std::string pack = absl::StrCat(git_, "/objects/pack/pack-", name, ".pack");
  base::UniqueFd fd(::open(pack.c_str(), O_RDONLY | O_CLOEXEC));
  char header[12] = {};
  if (fd && ::pread(fd.get(), header, sizeof(header), 0) == sizeof(header) &&
      absl::string_view(header + 8, 4) == absl::string_view("\0\0\0\0", 4)) {
    for (const char* ext : {".pack", ".idx", ".rev"}) {
      (void)::unlink(absl::StrCat(git_, "/objects/pack/pack-", name, ext).c_str());
    }
  }
  return absl::OkStatus();
}

absl::Status Builder::RemoveLooseObjects() {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(git_ + "/objects", ec)) {
    std::string name = e.path().filename().string();
    if (name.size() == 2 && absl::ascii_isxdigit(static_cast<unsigned char>(name[0])) &&
        absl::ascii_isxdigit(static_cast<unsigned char>(name[1]))) {
      ABOX_RETURN_IF_ERROR(base::RemoveUnder(dir_, e.path()));
    }
  }
  return absl::OkStatus();
}

absl::Status Builder::WriteIndex(const std::string& commit) {
  std::string index = git_ + "/index";
  if (commit.empty()) {
    return RemoveIfExists(dir_, index);
  }
  std::string tmp = dir_ + "/" + kFreshIndex;
  (void)::unlink(tmp.c_str());
  GitOptions options;
  options.env = {absl::StrCat("GIT_INDEX_FILE=", tmp)};
  ABOX_RETURN_IF_ERROR(BuiltGitOk({"read-tree", commit}, options).status());
  absl::StatusOr<std::string> fresh = base::ReadFile(tmp, size_t{4} << 30);
  absl::StatusOr<std::string> old = base::ReadFile(index, size_t{4} << 30);
  if (fresh.ok() && old.ok() && *fresh == *old) {
    (void)::unlink(tmp.c_str());
    return absl::OkStatus();
  }
  if (::rename(tmp.c_str(), index.c_str()) != 0) {
    return base::ErrnoError("rename(index)", errno);
  }
  return absl::OkStatus();
}

absl::Status Builder::CopyInfoExclude() {
  ABOX_ASSIGN_OR_RETURN(std::optional<std::string> exclude, ReadHostFile(host_.info_exclude));
  if (exclude) {
    return WriteIfChanged(git_ + "/info/exclude", *exclude);
  }
  return RemoveIfExists(dir_, git_ + "/info/exclude");
}

absl::Status Builder::List() {
  auto add = [&](const std::string& guest, const std::string& local) {
    struct stat st {};
    if (::lstat(absl::StrCat(dir_, "/", local).c_str(), &st) == 0 &&
        (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
      out_.entries[guest] = local;
    }
  };
  add(".git/objects", ".git/objects");
  add(".git/refs", ".git/refs");
  add(".git/HEAD", ".git/HEAD");
  add(".git/config", history_ == GitHistory::kFull ? kGuestConfig : ".git/config");
  for (const char* file : {".git/index", ".git/info/exclude", ".git/packed-refs", ".git/shallow"}) {
    add(file, file);
  }
  for (const char* sub : {".git/refs", ".git/logs"}) {
    for (const std::string& rel : FilesBelow(absl::StrCat(dir_, "/", sub))) {
      std::string path = absl::StrCat(sub, "/", rel);
      add(path, path);
    }
  }
  for (const std::string& rel : FilesBelow(git_ + "/objects/pack")) {
    if (absl::StartsWith(rel, "pack-") &&
        (absl::EndsWith(rel, ".pack") || absl::EndsWith(rel, ".idx") ||
         absl::EndsWith(rel, ".rev"))) {
      std::string path = absl::StrCat(".git/objects/pack/", rel);
      add(path, path);
    }
  }
  return absl::OkStatus();
}

}  // namespace git_internal

absl::StatusOr<GitSnapshot> BuildGitSnapshot(const std::string& worktree, const std::string& dir,
                                             const ExcludeRules& rules, GitHistory history) {
  if (worktree.empty() || dir.empty() || dir[0] != '/') {
    return absl::InvalidArgumentError("BuildGitSnapshot: needs a worktree and an absolute dir");
  }
  git_internal::Builder builder(worktree, dir, rules, history);
  return builder.Build();
}

}  // namespace abox::workspace
