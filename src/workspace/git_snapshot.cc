#include "src/workspace/git_snapshot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"
#include "src/workspace/git_command.h"
#include "src/workspace/git_sanitize.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Bumped when what a build produces changes: every existing build dir then starts over.
constexpr int kBuildVersion = 1;
constexpr size_t kGitOutputLimit = size_t{1} << 30;
// The host files read as data: a reflog, info/exclude, shallow, config.
constexpr size_t kHostFileLimit = size_t{64} << 20;
constexpr size_t kReflogTotalLimit = size_t{512} << 20;
constexpr size_t kMaxReported = 20;

constexpr char kStateFile[] = "state.json";
constexpr char kGitDir[] = ".git";
constexpr char kGuestConfig[] = ".git/abox-guest-config";  // full history: the guest's config
constexpr char kBuildIndex[] = ".git/abox-build-index";
constexpr char kFreshIndex[] = ".git/abox-index";

std::string FirstLine(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  return EscapePath(text.substr(0, text.find('\n')));
}

std::string Short(absl::string_view id) { return std::string(id.substr(0, 12)); }

bool IsObjectId(absl::string_view s) {
  return (s.size() == 40 || s.size() == 64) && std::all_of(s.begin(), s.end(), [](char c) {
           return absl::ascii_isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
         });
}

bool IsZeroId(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '0'; });
}

// A ref name abox writes as a file of the built repository: git's own rules (no component
// starting with '.', none ending in ".lock") plus ValidateRelativePath's.
bool IsWritableRefName(absl::string_view name) {
  if (!absl::StartsWith(name, "refs/") || !ValidateRelativePath(name).ok()) {
    return false;
  }
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (absl::StartsWith(part, ".") || absl::EndsWith(part, ".lock")) {
      return false;
    }
  }
  return true;
}

// A host file read as data: nullopt when it does not exist or is not a regular file (a symlink
// is not followed).
absl::StatusOr<std::optional<std::string>> ReadHostFile(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR || err == ELOOP) {
      return std::nullopt;
    }
    return base::ErrnoError(absl::StrCat("open(", EscapePath(path), ")"), err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("fstat(", EscapePath(path), ")"), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return std::nullopt;
  }
  ABOX_ASSIGN_OR_RETURN(std::string content, base::ReadAllFd(fd.get(), kHostFileLimit));
  return content;
}

// Writes `content` unless the file already holds exactly that (an unchanged file keeps its
// inode, so the sync's stat cache still knows it).
absl::Status WriteIfChanged(const std::string& path, absl::string_view content) {
  absl::StatusOr<std::string> old = base::ReadFile(path, content.size() + 1);
  if (old.ok() && *old == content) {
    return absl::OkStatus();
  }
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("mkdir ", fs::path(path).parent_path().string(), ": ", ec.message()));
  }
  return base::WriteFileAtomic(path, std::string_view(content.data(), content.size()), 0644);
}

absl::Status RemoveIfExists(const std::string& root, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return absl::OkStatus();
  }
  return base::RemoveUnder(root, path);
}

// Regular files below `dir` (relative to it, sorted); none when it does not exist.
std::vector<std::string> FilesBelow(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) {
      out.push_back(fs::relative(it->path(), dir, ec).string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// What the previous build left (state.json in the build dir; never sent).
struct BuildState {
  std::string fingerprint;
  std::string host_head;
  std::string head_ref;
  std::string commit;             // snapshot: the built commit
  std::vector<std::string> tips;  // every id the packs were built from (their objects are in)
};

BuildState LoadState(const std::string& path) {
  BuildState s;
  absl::StatusOr<std::string> text = base::ReadFile(path, size_t{256} << 20);
  if (!text.ok()) {
    return s;
  }
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return s;
  }
  s.fingerprint = j.value("fingerprint", "");
  s.host_head = j.value("host_head", "");
  s.head_ref = j.value("head_ref", "");
  s.commit = j.value("commit", "");
  if (j.contains("tips") && j["tips"].is_array()) {
    for (const json& t : j["tips"]) {
      if (t.is_string() && IsObjectId(t.get<std::string>())) {
        s.tips.push_back(t.get<std::string>());
      }
    }
  }
  return s;
}

absl::Status SaveState(const std::string& path, const BuildState& s) {
  json j = {{"version", kBuildVersion}, {"fingerprint", s.fingerprint}, {"host_head", s.host_head},
            {"head_ref", s.head_ref},   {"commit", s.commit},           {"tips", s.tips}};
  return base::WriteFileAtomic(path, j.dump(1), 0600);
}

// The user's repository, as rev-parse and friends describe it.
struct Host {
  std::string format = "sha1";
  std::string common_dir;  // absolute
  std::string objects;     // absolute
  std::string info_exclude;
  std::string logs_head;
  std::string shallow;
  std::string head;      // HEAD's commit; empty when unborn
  std::string head_ref;  // what HEAD points at ("refs/heads/main"); empty when detached
};

class Builder {
 public:
  Builder(std::string worktree, std::string dir, const ExcludeRules& rules, GitHistory history)
      : worktree_(std::move(worktree)),
        dir_(std::move(dir)),
        git_(dir_ + "/" + kGitDir),
        rules_(rules),
        history_(history) {}

  absl::StatusOr<GitSnapshot> Build() {
    ABOX_RETURN_IF_ERROR(ProbeHost());
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

 private:
  std::string Alternates() const { return git_ + "/objects/info/alternates"; }

  // git in the user's repository: only commands that read refs and paths.
  absl::StatusOr<GitResult> HostGit(const std::vector<std::string>& args) {
    return RunGit(worktree_, args);
  }

  absl::StatusOr<std::string> HostGitOk(const std::vector<std::string>& args) {
    ABOX_ASSIGN_OR_RETURN(GitResult r, HostGit(args));
    if (r.exit_code != 0) {
      return absl::InternalError(absl::StrCat("git ", args[0], " failed in ", EscapePath(worktree_),
                                              ": ", FirstLine(r.err)));
    }
    return std::move(r.out);
  }

  // git in the repository being built: its own minimal config, nothing of the user's.
  absl::StatusOr<GitResult> BuiltGit(const std::vector<std::string>& args, GitOptions options) {
    std::vector<std::string> argv = {"-c",
                                     "gc.auto=0",
                                     "-c",
                                     "maintenance.auto=false",
                                     "-c",
                                     "commit.gpgSign=false",
                                     "--git-dir=" + git_};
    argv.insert(argv.end(), args.begin(), args.end());
    options.no_global_config = true;
    if (options.max_output == GitOptions{}.max_output) {
      options.max_output = kGitOutputLimit;
    }
    return RunGit(dir_, argv, options);
  }

  absl::StatusOr<std::string> BuiltGitOk(const std::vector<std::string>& args,
                                         GitOptions options = {}) {
    ABOX_ASSIGN_OR_RETURN(GitResult r, BuiltGit(args, std::move(options)));
    if (r.exit_code != 0) {
      return MissingOrInternal(args[0], r.err);
    }
    return std::move(r.out);
  }

  static absl::Status MissingOrInternal(absl::string_view command, absl::string_view err) {
    if (absl::StrContains(err, "bad object") || absl::StrContains(err, "missing") ||
        absl::StrContains(err, "unable to read") || absl::StrContains(err, "not a valid") ||
        absl::StrContains(err, "could not read")) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the repository lacks objects the sandbox's copy needs (a partial clone, or a "
          "damaged repository?): git ",
          command, ": ", FirstLine(err)));
    }
    return absl::InternalError(
        absl::StrCat("building the sandbox's git repository: git ", command, ": ", FirstLine(err)));
  }

  absl::Status ProbeHost() {
    ABOX_ASSIGN_OR_RETURN(std::string paths,
                          HostGitOk({"rev-parse", "--show-object-format", "--git-common-dir",
                                     "--git-path", "objects", "--git-path", "info/exclude",
                                     "--git-path", "logs/HEAD", "--git-path", "shallow"}));
    std::vector<std::string> lines = absl::StrSplit(paths, '\n');
    if (lines.size() < 6) {
      return absl::InternalError(
          absl::StrCat("unexpected git rev-parse output in ", EscapePath(worktree_)));
    }
    auto absolute = [&](const std::string& p) {
      return absl::StartsWith(p, "/") ? p : absl::StrCat(worktree_, "/", p);
    };
    host_.format = lines[0] == "sha256" ? "sha256" : "sha1";
    host_.common_dir = absolute(lines[1]);
    host_.objects = absolute(lines[2]);
    host_.info_exclude = absolute(lines[3]);
    host_.logs_head = absolute(lines[4]);
    host_.shallow = absolute(lines[5]);
    if (host_.objects.find('\n') != std::string::npos) {
      return absl::InvalidArgumentError(
          "the repository's object directory has a newline in its path, which git's "
          "alternates file cannot name: move the repository");
    }
    struct stat st {};
    if (::stat(host_.objects.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the repository's object directory ", EscapePath(host_.objects), " is not there"));
    }
    ABOX_ASSIGN_OR_RETURN(GitResult head,
                          HostGit({"rev-parse", "-q", "--verify", "HEAD^{commit}"}));
    if (head.exit_code == 0) {
      host_.head = std::string(absl::StripAsciiWhitespace(head.out));
      if (!IsObjectId(host_.head)) {
        return absl::InternalError("unexpected git rev-parse HEAD output");
      }
    }
    ABOX_ASSIGN_OR_RETURN(GitResult ref, HostGit({"symbolic-ref", "-q", "HEAD"}));
    if (ref.exit_code == 0) {
      host_.head_ref = std::string(absl::StripAsciiWhitespace(ref.out));
    }
    if (host_.head.empty() && host_.head_ref.empty()) {
      return absl::InternalError("HEAD is neither a commit nor a branch");
    }
    return absl::OkStatus();
  }

  std::string Fingerprint() const {
    std::string text =
        absl::StrCat(kBuildVersion, "\n", history_ == GitHistory::kSnapshot ? "snapshot" : "full",
                     "\n", host_.format, "\n");
    for (const std::string& p : rules_.patterns()) {
      absl::StrAppend(&text, p, absl::string_view("\0", 1));
    }
    for (const auto& [path, reason] : rules_.exact_paths()) {
      absl::StrAppend(&text, "=", path, absl::string_view("\0", 1));
    }
    return Sha256Hex(text);
  }

  // The repository that both the build and (in a snapshot) the guest read: no remotes, no
  // host settings.
  std::string BuildConfig() const {
    std::string config =
        "# abox: the sandbox's repository, built on the host for it (see its first commit).\n"
        "[core]\n";
    absl::StrAppend(&config, "\trepositoryformatversion = ", host_.format == "sha256" ? 1 : 0,
                    "\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n");
    if (host_.format == "sha256") {
      absl::StrAppend(&config, "[extensions]\n\tobjectformat = sha256\n");
    }
    return config;
  }

  // The build dir as the previous build left it, or new; started over when the rules, the
  // mode, the object format or the build version changed.
  absl::Status Prepare() {
    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
      return base::ErrnoError(absl::StrCat("mkdir(", dir_, ")"), errno);
    }
    (void)::unlink(Alternates().c_str());  // left by a build that died
    state_ = LoadState(dir_ + "/" + kStateFile);
    if (state_.fingerprint != Fingerprint()) {
      return Reset();
    }
    return MakeLayout();
  }

  absl::Status Reset() {
    ABOX_RETURN_IF_ERROR(RemoveIfExists(dir_, git_));
    (void)::unlink((dir_ + "/" + kStateFile).c_str());
    state_ = BuildState{};
    state_.fingerprint = Fingerprint();
    return MakeLayout();
  }

  absl::Status MakeLayout() {
    for (const char* sub :
         {"", "/objects", "/objects/pack", "/objects/info", "/refs", "/refs/heads", "/info"}) {
      std::string path = git_ + sub;
      if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
        return base::ErrnoError(absl::StrCat("mkdir(", path, ")"), errno);
      }
    }
    // git only opens a directory with a HEAD; the build writes the real one at the end.
    struct stat st {};
    if (::lstat((git_ + "/HEAD").c_str(), &st) != 0) {
      ABOX_RETURN_IF_ERROR(base::WriteFileAtomic(git_ + "/HEAD", "ref: refs/heads/main\n", 0644));
    }
    return WriteIfChanged(git_ + "/config", BuildConfig());
  }

  // Before building on the previous build: everything its tips reach must be in our own packs
  // (checked with the host's objects not borrowed), or the build starts over.
  absl::Status CheckOldPacks() {
    std::string check;
    for (const std::string& tip : state_.tips) {
      absl::StrAppend(&check, tip, "\n");
    }
    if (check.empty()) {
      return absl::OkStatus();
    }
    GitOptions o;
    o.input = check;
    absl::StatusOr<GitResult> r =
        BuiltGit({"cat-file", "--batch-check=%(objectname)"}, std::move(o));
    if (r.ok() && r->exit_code == 0 && !absl::StrContains(r->out, " missing")) {
      return absl::OkStatus();
    }
    return Reset();
  }

  absl::Status Borrow() { return base::WriteFileAtomic(Alternates(), host_.objects + "\n", 0644); }

  // ---- Snapshot ----

  absl::Status BuildSnapshot() {
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
        ABOX_RETURN_IF_ERROR(
            WriteIfChanged(absl::StrCat(git_, "/", host_.head_ref), commit + "\n"));
      }
    } else if (!commit.empty()) {
      head_file = commit + "\n";
      if (!host_.head_ref.empty()) {
        out_.notes.push_back(absl::StrCat("git: HEAD names ", EscapePath(host_.head_ref),
                                          ", not a branch: the sandbox's HEAD is detached"));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "HEAD names ", EscapePath(host_.head_ref),
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

  // HEAD's tree without the excluded paths, committed alone; deterministic for a given HEAD
  // (abox's identity, HEAD's committer date), so rebuilding it yields the same id.
  absl::StatusOr<std::string> MakeSnapshotCommit() {
    ABOX_ASSIGN_OR_RETURN(std::string listing,
                          BuiltGitOk({"ls-tree", "-r", "-z", "--full-tree", host_.head}));
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
    std::string message = absl::StrCat(
        "abox: snapshot of ", where, " at ", host_.head,
        "\n\nThis repository was built for the sandbox from the tree of the host's HEAD, without "
        "the\npaths abox keeps out of sandboxes (",
        out_.excluded.size(),
        " left out). The host's history, other branches, tags\nand stashes are not here.\n\n"
        "Abox-Host-Head: ",
        host_.head, "\n");
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

  // The excluded tree paths are kept beside the state so that an unchanged HEAD reports them
  // without reading its tree again.
  absl::Status SaveExcluded() {
    json j = json::array();
    for (const auto& [path, pattern] : out_.excluded) {
      j.push_back({path, pattern});
    }
    return base::WriteFileAtomic(dir_ + "/excluded.json",
                                 j.dump(-1, ' ', false, json::error_handler_t::replace), 0600);
  }

  std::vector<std::pair<std::string, std::string>> ExcludedOf(const BuildState&) const {
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

  // ---- Full history ----

  absl::Status BuildFullHistory() {
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
          out_.notes.push_back(
              absl::StrCat("git: left out the symbolic ref ", EscapePath(refname)));
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

  // Every commit the built repository's refs and reflogs reach that `old_tips` did not (those
  // were checked by an earlier build), against each of its parents, deletions left out: any
  // path in any of their trees is added or changed in one of these diffs (a root commit's
  // lists its whole tree; a path the same as in every parent is in a parent's), so none is
  // missed.
  absl::Status ScanHistory(const std::vector<std::string>& old_tips) {
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

  absl::Status WriteGuestConfig() {
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

  // ---- Shared ----

  // One pack with the objects `tips` (or, when empty, every ref and reflog of the built
  // repository) reach and `old_tips` do not; the host's objects are borrowed to make it.
  absl::Status Pack(const std::vector<std::string>& tips, const std::vector<std::string>& old) {
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

  // write-tree and commit-tree leave loose objects; the packs hold them now.
  absl::Status RemoveLooseObjects() {
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

  // The guest's index: the tree of `commit` with no stat data (none is true in the guest).
  absl::Status WriteIndex(const std::string& commit) {
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

  absl::Status CopyInfoExclude() {
    ABOX_ASSIGN_OR_RETURN(std::optional<std::string> exclude, ReadHostFile(host_.info_exclude));
    if (exclude) {
      return WriteIfChanged(git_ + "/info/exclude", *exclude);
    }
    return RemoveIfExists(dir_, git_ + "/info/exclude");
  }

  absl::Status List() {
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
    for (const char* file :
         {".git/index", ".git/info/exclude", ".git/packed-refs", ".git/shallow"}) {
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

  const std::string worktree_;
  const std::string dir_;
  const std::string git_;  // dir_/.git
  const ExcludeRules& rules_;
  const GitHistory history_;
  Host host_;
  BuildState state_;
  GitSnapshot out_;
};

}  // namespace

absl::StatusOr<GitSnapshot> BuildGitSnapshot(const std::string& worktree, const std::string& dir,
                                             const ExcludeRules& rules, GitHistory history) {
  if (worktree.empty() || dir.empty() || dir[0] != '/') {
    return absl::InvalidArgumentError("BuildGitSnapshot: needs a worktree and an absolute dir");
  }
  Builder builder(worktree, dir, rules, history);
  return builder.Build();
}

}  // namespace abox::workspace
