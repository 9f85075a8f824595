#include "src/workspace/diff_render.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/workspace/exec_files.h"
#include "src/workspace/git_command.h"
#include "src/workspace/paths.h"

namespace abox::workspace {
namespace {

struct Side {
  std::string kind;  // "" when absent
  uint32_t mode = 0;
  std::string content;  // file content or symlink target
  bool too_large = false;
};

absl::StatusOr<Side> Load(const ObjectStore& objects, const Manifest& m, const std::string& path,
                          const DiffOptions& options) {
  Side side;
  auto it = m.find(path);
  if (it == m.end()) {
    return side;
  }
  const Entry& e = it->second;
  if (e.type == EntryType::kSymlink) {
    side.kind = "symlink";
    side.mode = 0120000;
    side.content = e.link_target;
    return side;
  }
  side.kind = "file";
  side.mode = 0100000 | ((e.mode & 0111) != 0 ? 0755 : 0644);
  if (e.size > options.max_text_bytes) {
    side.too_large = true;
    return side;
  }
  ABOX_ASSIGN_OR_RETURN(side.content, objects.Read(e.sha256, options.max_text_bytes));
  return side;
}

bool LooksBinary(const Side& s) {
  // git's rule: a NUL byte in the first 8000 bytes.
  return s.too_large || s.content.substr(0, 8000).find('\0') != std::string::npos;
}

class TempDir {
 public:
  static absl::StatusOr<TempDir> Create() {
    std::string tmpl =
        absl::StrCat(::getenv("TMPDIR") ? ::getenv("TMPDIR") : "/tmp", "/abox-diff-XXXXXX");
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return base::ErrnoError("mkdtemp(abox-diff)", errno);
    }
    return TempDir(tmpl);
  }
  TempDir(TempDir&& o) noexcept : path_(std::exchange(o.path_, "")) {}
  ~TempDir() {
    if (!path_.empty()) {
      std::filesystem::path p(path_);
      (void)base::RemoveUnder(p.parent_path(), p);
    }
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

// The hunks of `git diff --no-index` between two texts (everything from the first "@@").
absl::StatusOr<std::string> Hunks(const TempDir& tmp, const std::string& a, const std::string& b,
                                  int context) {
  std::string pa = absl::StrCat(tmp.path(), "/a");
  std::string pb = absl::StrCat(tmp.path(), "/b");
  ABOX_RETURN_IF_ERROR(base::WriteFileAtomic(pa, a, 0600));
  ABOX_RETURN_IF_ERROR(base::WriteFileAtomic(pb, b, 0600));
  ABOX_ASSIGN_OR_RETURN(GitResult r,
                        RunGit(tmp.path(), {"diff", "--no-index", "--no-color", "--text",
                                            absl::StrCat("-U", context), "--", "a", "b"}));
  if (r.exit_code > 1) {
    return absl::InternalError(absl::StrCat("git diff failed: ", r.err));
  }
  size_t at = r.out.find("\n@@");
  return at == std::string::npos ? std::string() : r.out.substr(at + 1);
}

void CountLines(absl::string_view hunks, FileDiff& d) {
  for (absl::string_view line : absl::StrSplit(hunks, '\n')) {
    if (absl::StartsWith(line, "+")) {
      ++d.additions;
    } else if (absl::StartsWith(line, "-")) {
      ++d.deletions;
    }
  }
}

absl::StatusOr<FileDiff> DiffOne(const ObjectStore& objects, const GuestChanges& changes,
                                 const std::string& path, const TempDir& tmp,
                                 const DiffOptions& options) {
  ABOX_ASSIGN_OR_RETURN(Side old_side, Load(objects, changes.base, path, options));
  ABOX_ASSIGN_OR_RETURN(Side new_side, Load(objects, changes.guest, path, options));
  FileDiff d;
  d.path = path;
  d.old_kind = old_side.kind;
  d.new_kind = new_side.kind;
  d.old_mode = old_side.mode;
  d.new_mode = new_side.mode;
  d.status = old_side.kind.empty()            ? "added"
             : new_side.kind.empty()          ? "deleted"
             : old_side.kind != new_side.kind ? "type_changed"
                                              : "modified";
  d.exec_sensitive = ExecSensitiveReason(path);
  d.binary = (!old_side.kind.empty() && LooksBinary(old_side)) ||
             (!new_side.kind.empty() && LooksBinary(new_side));
  std::string name = EscapePath(path);
  std::string header = absl::StrCat("diff --git a/", name, " b/", name, "\n");
  if (d.status == "added") {
    absl::StrAppend(&header, absl::StrFormat("new file mode %06o\n", new_side.mode));
  } else if (d.status == "deleted") {
    absl::StrAppend(&header, absl::StrFormat("deleted file mode %06o\n", old_side.mode));
  } else if (old_side.mode != new_side.mode) {
    absl::StrAppend(
        &header, absl::StrFormat("old mode %06o\nnew mode %06o\n", old_side.mode, new_side.mode));
  }
  std::string from = old_side.kind.empty() ? "/dev/null" : absl::StrCat("a/", name);
  std::string to = new_side.kind.empty() ? "/dev/null" : absl::StrCat("b/", name);
  if (d.binary) {
    if (old_side.content != new_side.content || old_side.too_large || new_side.too_large) {
      absl::StrAppend(&header, "Binary files ", from, " and ", to, " differ\n");
    }
    d.patch = options.patches ? header : "";
    return d;
  }
  if (old_side.content == new_side.content) {
    d.patch = options.patches ? header : "";  // a mode change only
    return d;
  }
  ABOX_ASSIGN_OR_RETURN(std::string hunks,
                        Hunks(tmp, old_side.content, new_side.content, options.context_lines));
  CountLines(hunks, d);
  if (options.patches) {
    d.patch = absl::StrCat(header, "--- ", from, "\n+++ ", to, "\n", hunks);
  }
  return d;
}

}  // namespace

absl::StatusOr<std::vector<FileDiff>> RenderDiff(const ObjectStore& objects,
                                                 const GuestChanges& changes,
                                                 const DiffOptions& options) {
  std::vector<std::string> paths = changes.changes.added;
  paths.insert(paths.end(), changes.changes.modified.begin(), changes.changes.modified.end());
  paths.insert(paths.end(), changes.changes.deleted.begin(), changes.changes.deleted.end());
  std::sort(paths.begin(), paths.end());
  std::vector<FileDiff> out;
  if (paths.empty()) {
    return out;
  }
  ABOX_ASSIGN_OR_RETURN(TempDir tmp, TempDir::Create());
  for (const std::string& path : paths) {
    ABOX_ASSIGN_OR_RETURN(FileDiff d, DiffOne(objects, changes, path, tmp, options));
    out.push_back(std::move(d));
  }
  return out;
}

std::string FormatDiffStat(const std::vector<FileDiff>& diffs) {
  size_t width = 0;
  for (const FileDiff& d : diffs) {
    width = std::max(width, EscapePath(d.path).size());
  }
  width = std::min<size_t>(width, 60);
  std::string out;
  int adds = 0;
  int dels = 0;
  for (const FileDiff& d : diffs) {
    std::string counts = d.binary ? "Bin"
                                  : absl::StrCat(d.additions + d.deletions, " ",
                                                 std::string(std::min(d.additions, 40), '+'),
                                                 std::string(std::min(d.deletions, 40), '-'));
    absl::StrAppend(
        &out, absl::StrFormat(" %-*s | %s%s\n", static_cast<int>(width), EscapePath(d.path), counts,
                              d.exec_sensitive ? "  (runs code: needs --allow-exec-files)" : ""));
    adds += d.additions;
    dels += d.deletions;
  }
  absl::StrAppend(&out, absl::StrFormat(" %d file%s changed, %d insertion%s(+), %d deletion%s(-)\n",
                                        diffs.size(), diffs.size() == 1 ? "" : "s", adds,
                                        adds == 1 ? "" : "s", dels, dels == 1 ? "" : "s"));
  return out;
}

}  // namespace abox::workspace
