// Full history for the guest's .git: the host's refs, HEAD, reflogs and shallow list, refused
// when any commit they reach has a path the exclude rules leave out (git_snapshot.h).
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/status_macros.h"
#include "src/workspace/git_command.h"
#include "src/workspace/git_sanitize.h"
#include "src/workspace/git_snapshot_internal.h"
#include "src/workspace/paths.h"

namespace abox::workspace::git_internal {

namespace fs = std::filesystem;

absl::Status Builder::BuildFullHistory() {
  // Refs: every ref, as packed-refs (symbolic ones as files).
  ABOX_ASSIGN_OR_RETURN(std::string listing,
                        HostGitOk({"for-each-ref",
                                   "--format=%(objectname)%09%(objecttype)%09%("
                                   "*objecttype)%09%(refname)%09%(symref)"}));
  std::string packed_refs;                   // no traits: git sorts and peels it itself
  std::map<std::string, std::string> loose;  // refname -> file content
  std::set<std::string> tips;
  std::vector<std::string> not_commits;
  for (absl::string_view line : absl::StrSplit(listing, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f.size() != 5 || !IsObjectId(f[0]) || !absl::StartsWith(f[3], "refs/")) {
      return absl::InternalError(
          absl::StrCat("unexpected git for-each-ref output: ", EscapePath(line)));
    }
    const std::string& refname = f[3];
    if (!f[4].empty()) {
      if (!IsWritableRefName(refname)) {
        out_.notes.push_back(absl::StrCat("git: left out the symbolic ref ", EscapePath(refname)));
        continue;
      }
      loose[refname] = absl::StrCat("ref: ", f[4], "\n");
      continue;
    }
    const std::string& type = f[2].empty() ? f[1] : f[2];
    if (type != "commit") {
      not_commits.push_back(absl::StrCat(EscapePath(refname), " (a ", type, ")"));
    }
    absl::StrAppend(&packed_refs, f[0], " ", refname, "\n");
    tips.insert(f[0]);
  }
  if (!not_commits.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "full git history: these refs name no commit, so abox cannot check what they hold "
        "for excluded paths: ",
        absl::StrJoin(not_commits, ", "), "; delete them or leave the history out"));
  }
  std::string head_file;
  if (!host_.head_ref.empty()) {
    head_file = absl::StrCat("ref: ", host_.head_ref, "\n");
  } else {
    head_file = host_.head + "\n";
  }
  if (!host_.head.empty()) {
    tips.insert(host_.head);
  }
  // Reflogs: HEAD's (this worktree's) and every ref's.
  std::map<std::string, std::string> logs;  // path below .git/logs -> content
  size_t total = 0;
  auto add_log = [&](const std::string& rel, const std::string& path) -> absl::Status {
    ABOX_ASSIGN_OR_RETURN(std::optional<std::string> content, ReadHostFile(path));
    if (!content) {
      return absl::OkStatus();
    }
    total += content->size();
    if (total > kReflogTotalLimit) {
      return absl::ResourceExhaustedError("the repository's reflogs are over 512 MiB");
    }
    for (absl::string_view entry : absl::StrSplit(*content, '\n', absl::SkipEmpty())) {
      std::vector<absl::string_view> ids = absl::StrSplit(entry, absl::MaxSplits(' ', 2));
      for (size_t i = 0; i < 2 && i < ids.size(); ++i) {
        if (IsObjectId(ids[i]) && !IsZeroId(ids[i])) {
          tips.insert(std::string(ids[i]));
        }
      }
    }
    logs[rel] = *std::move(content);
    return absl::OkStatus();
  };
  ABOX_RETURN_IF_ERROR(add_log("HEAD", host_.logs_head));
  std::string ref_logs = host_.common_dir + "/logs/refs";
  for (const std::string& rel : FilesBelow(ref_logs)) {
    std::string refname = absl::StrCat("refs/", rel);
    if (!IsWritableRefName(refname)) {
      out_.notes.push_back(absl::StrCat("git: left out the reflog of ", EscapePath(refname)));
      continue;
    }
    ABOX_RETURN_IF_ERROR(add_log(refname, absl::StrCat(ref_logs, "/", rel)));
  }
  ABOX_ASSIGN_OR_RETURN(std::optional<std::string> shallow, ReadHostFile(host_.shallow));

  std::vector<std::string> new_tips(tips.begin(), tips.end());
  const bool build = new_tips != state_.tips;
  if (build) {
    ABOX_RETURN_IF_ERROR(CheckOldPacks());
  }
  // The built repository gets exactly these refs, reflogs and shallow list; the scan and
  // the pack below read them from there.
  ABOX_RETURN_IF_ERROR(RemoveIfExists(dir_, git_ + "/refs"));
  ABOX_RETURN_IF_ERROR(RemoveIfExists(dir_, git_ + "/logs"));
  for (const char* sub : {"/refs", "/refs/heads", "/refs/tags"}) {
    (void)::mkdir((git_ + sub).c_str(), 0755);
  }
  for (const auto& [refname, content] : loose) {
    ABOX_RETURN_IF_ERROR(WriteIfChanged(absl::StrCat(git_, "/", refname), content));
  }
  for (const auto& [rel, content] : logs) {
    ABOX_RETURN_IF_ERROR(WriteIfChanged(absl::StrCat(git_, "/logs/", rel), content));
  }
  ABOX_RETURN_IF_ERROR(WriteIfChanged(git_ + "/packed-refs", packed_refs));
  ABOX_RETURN_IF_ERROR(WriteIfChanged(git_ + "/HEAD", head_file));
  if (shallow) {
    ABOX_RETURN_IF_ERROR(WriteIfChanged(git_ + "/shallow", *shallow));
  } else {
    ABOX_RETURN_IF_ERROR(RemoveIfExists(dir_, git_ + "/shallow"));
  }
  ABOX_RETURN_IF_ERROR(WriteGuestConfig());

  if (build) {
    ABOX_RETURN_IF_ERROR(Borrow());
    ABOX_RETURN_IF_ERROR(ScanHistory(state_.tips));
    ABOX_RETURN_IF_ERROR(Pack({}, state_.tips));
    ABOX_RETURN_IF_ERROR(RemoveLooseObjects());
    out_.rebuilt = true;
  }
  if (out_.rebuilt || state_.host_head != host_.head || !fs::exists(git_ + "/index")) {
    ABOX_RETURN_IF_ERROR(WriteIndex(host_.head));
  }
  state_.tips = std::move(new_tips);
  state_.host_head = host_.head;
  state_.head_ref = host_.head_ref;
  ABOX_RETURN_IF_ERROR(SaveState(dir_ + "/" + kStateFile, state_));
  if (out_.rebuilt) {
    out_.notes.push_back(absl::StrCat(
        "git: the sandbox's repository has the full history (", tips.size(),
        " commits and tags named by refs and reflogs); no path abox keeps out appears in it"));
  }
  return absl::OkStatus();
}

absl::Status Builder::ScanHistory(const std::vector<std::string>& old_tips) {
  std::string input;
  for (const std::string& tip : old_tips) {
    absl::StrAppend(&input, "^", tip, "\n");
  }
  struct Hit {
    std::string pattern;
    std::string commit;
  };
  std::map<std::string, Hit> hits;
  std::string pending;
  std::string commit;
  bool after_header = false;
  auto token = [&](absl::string_view t) {
    if (t.size() > 1 && t[0] == '\x01' && IsObjectId(t.substr(1))) {
      commit = std::string(t.substr(1));
      after_header = true;
      return;
    }
    if (after_header && absl::StartsWith(t, "\n")) {
      t.remove_prefix(1);
    }
    after_header = false;
    if (t.empty()) {
      return;
    }
    // Newest first: the last commit seen is the oldest one that has the path.
    if (auto it = hits.find(std::string(t)); it != hits.end()) {
      it->second.commit = commit;
    } else if (std::optional<std::string> pattern = rules_.Match(t, false)) {
      hits.emplace(std::string(t), Hit{*pattern, commit});
    }
  };
  GitOptions options;
  options.input = input;
  options.on_output = [&](absl::string_view chunk) -> absl::Status {
    pending.append(chunk.data(), chunk.size());
    size_t start = 0;
    for (size_t nul = pending.find('\0'); nul != std::string::npos;
         nul = pending.find('\0', start)) {
      token(absl::string_view(pending).substr(start, nul - start));
      start = nul + 1;
    }
    pending.erase(0, start);
    return absl::OkStatus();
  };
  ABOX_ASSIGN_OR_RETURN(
      GitResult r,
      BuiltGit({"log", "--all", "--reflog", "--stdin", "-m", "--no-renames", "--name-only",
                "--diff-filter=d", "--no-ext-diff", "--no-textconv", "-z", "--format=%x01%H"},
               options));
  if (r.exit_code != 0) {
    return MissingOrInternal("log", r.err);
  }
  if (!pending.empty()) {
    token(pending);
  }
  if (hits.empty()) {
    return absl::OkStatus();
  }
  std::vector<std::string> shown;
  for (const auto& [path, hit] : hits) {
    if (shown.size() == kMaxReported) {
      shown.push_back(absl::StrCat("and ", hits.size() - kMaxReported, " more"));
      break;
    }
    shown.push_back(
        absl::StrCat(EscapePath(path), " (", hit.pattern, ") in commit ", Short(hit.commit)));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "full git history was asked for, but paths abox keeps out of sandboxes are in it: ",
      absl::StrJoin(shown, ", "),
      ". Leave the history out (the default: the sandbox gets HEAD's tree without them, as one "
      "commit), or rewrite the history without them (for example git filter-repo "
      "--invert-paths --path PATH) and remove them from stashes and reflogs"));
}

absl::Status Builder::WriteGuestConfig() {
  std::string path = host_.common_dir + "/config";
  ABOX_ASSIGN_OR_RETURN(std::optional<std::string> config, ReadHostFile(path));
  std::string guest = BuildConfig();
  if (config) {
    std::vector<std::string> removed;
    absl::StatusOr<std::string> sanitized = SanitizeGitConfig(*config, &removed);
    if (sanitized.ok()) {
      guest = *std::move(sanitized);
      if (!removed.empty()) {
        out_.notes.push_back(
            absl::StrCat(".git/config: removed for the guest: ", absl::StrJoin(removed, ", ")));
      }
    } else {
      out_.notes.push_back(absl::StrCat(".git/config could not be sanitized (",
                                        sanitized.status().message(),
                                        "): the guest gets a minimal config without remotes"));
    }
  }
  return WriteIfChanged(dir_ + "/" + kGuestConfig, guest);
}

}  // namespace abox::workspace::git_internal
