// The guest .git's build directory and the two repositories git runs in: the user's (read
// only: rev-parse, symbolic-ref, for-each-ref) and the one being built (its own config).
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

namespace abox::workspace::git_internal {

namespace fs = std::filesystem;
using nlohmann::json;

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

absl::StatusOr<GitResult> Builder::HostGit(const std::vector<std::string>& args) {
  return RunGit(worktree_, args);
}

absl::StatusOr<std::string> Builder::HostGitOk(const std::vector<std::string>& args) {
  ABOX_ASSIGN_OR_RETURN(GitResult r, HostGit(args));
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("git ", args[0], " failed in ", EscapePath(worktree_),
                                            ": ", FirstLine(r.err)));
  }
  return std::move(r.out);
}

absl::StatusOr<GitResult> Builder::BuiltGit(const std::vector<std::string>& args,
                                            GitOptions options) {
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

absl::StatusOr<std::string> Builder::BuiltGitOk(const std::vector<std::string>& args,
                                                GitOptions options) {
  ABOX_ASSIGN_OR_RETURN(GitResult r, BuiltGit(args, std::move(options)));
  if (r.exit_code != 0) {
    return MissingOrInternal(args[0], r.err);
  }
  return std::move(r.out);
}

absl::Status Builder::MissingOrInternal(absl::string_view command, absl::string_view err) {
  if (absl::StrContains(err, "bad object") || absl::StrContains(err, "missing") ||
      absl::StrContains(err, "unable to read") || absl::StrContains(err, "not a valid") ||
      absl::StrContains(err, "could not read")) {
    return absl::FailedPreconditionError(
        absl::StrCat("the repository lacks objects the sandbox's copy needs (a partial clone, or a "
                     "damaged repository?): git ",
                     command, ": ", FirstLine(err)));
  }
  return absl::InternalError(
      absl::StrCat("building the sandbox's git repository: git ", command, ": ", FirstLine(err)));
}

absl::Status Builder::ProbeHost() {
  ABOX_ASSIGN_OR_RETURN(
      std::string paths,
      HostGitOk({"rev-parse", "--show-object-format", "--git-common-dir", "--git-path", "objects",
                 "--git-path", "info/exclude", "--git-path", "logs/HEAD", "--git-path", "shallow",
                 "--show-prefix"}));
  // The prefix comes last: whatever its name holds, it is the rest of the output.
  std::vector<std::string> lines = absl::StrSplit(paths, absl::MaxSplits('\n', 6));
  if (lines.size() < 7) {
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
  host_.prefix = lines[6];
  if (absl::EndsWith(host_.prefix, "\n")) {
    host_.prefix.pop_back();
  }
  if (host_.objects.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError(
        "the repository's object directory has a newline in its path, which git's "
        "alternates file cannot name: move the repository");
  }
  struct stat st {};
  if (::stat(host_.objects.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("the repository's object directory ",
                                                      EscapePath(host_.objects), " is not there"));
  }
  ABOX_ASSIGN_OR_RETURN(GitResult head, HostGit({"rev-parse", "-q", "--verify", "HEAD^{commit}"}));
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

std::string Builder::Fingerprint() const {
  std::string text =
      absl::StrCat(kBuildVersion, "\n", history_ == GitHistory::kSnapshot ? "snapshot" : "full",
                   "\n", host_.format, "\n");
  for (const std::string& p : rules_.patterns()) {
    absl::StrAppend(&text, p, absl::string_view("\0", 1));
  }
  for (const auto& [path, reason] : rules_.exact_paths()) {
    absl::StrAppend(&text, "=", path, absl::string_view("\0", 1));
  }
  if (!host_.prefix.empty()) {  // (a worktree's top keeps the fingerprint it always had)
    absl::StrAppend(&text, "prefix:", host_.prefix, absl::string_view("\0", 1));
  }
  return Sha256Hex(text);
}

std::string Builder::BuildConfig() const {
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

absl::Status Builder::Prepare() {
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

absl::Status Builder::Reset() {
  ABOX_RETURN_IF_ERROR(RemoveIfExists(dir_, git_));
  (void)::unlink((dir_ + "/" + kStateFile).c_str());
  state_ = BuildState{};
  state_.fingerprint = Fingerprint();
  return MakeLayout();
}

absl::Status Builder::MakeLayout() {
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

absl::Status Builder::CheckOldPacks() {
  std::string check;
  for (const std::string& tip : state_.tips) {
    absl::StrAppend(&check, tip, "\n");
  }
  if (check.empty()) {
    return absl::OkStatus();
  }
  GitOptions o;
  o.input = check;
  absl::StatusOr<GitResult> r = BuiltGit({"cat-file", "--batch-check=%(objectname)"}, std::move(o));
  if (r.ok() && r->exit_code == 0 && !absl::StrContains(r->out, " missing")) {
    return absl::OkStatus();
  }
  return Reset();
}

}  // namespace abox::workspace::git_internal
