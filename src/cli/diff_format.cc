#include "src/cli/diff_format.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/cli/terminal_text.h"

namespace abox::cli {
namespace {

constexpr char kControlFlag[] = "  [control characters]";

// The patches, or the --stat lines and their summary, of `list`.
void AppendFiles(const std::vector<const api::FileDiff*>& list, bool stat, std::string* out) {
  long long adds = 0;
  long long dels = 0;
  for (const api::FileDiff* f : list) {
    if (!stat) {
      absl::StrAppend(out, f->patch);
      continue;
    }
    long long a = f->additions;
    long long d = f->deletions;
    adds += a;
    dels += d;
    std::string change = f->binary
                             ? "Bin"
                             : absl::StrCat(a + d, " ", std::string(std::clamp(a, 0LL, 40LL), '+'),
                                            std::string(std::clamp(d, 0LL, 40LL), '-'));
    absl::StrAppendFormat(out, " %-50s | %s%s\n", f->path, change,
                          f->control_characters.value_or(false) ? kControlFlag : "");
  }
  if (stat) {
    absl::StrAppendFormat(out, " %d file%s changed, %d insertion%s(+), %d deletion%s(-)\n",
                          list.size(), list.size() == 1 ? "" : "s", adds, adds == 1 ? "" : "s",
                          dels, dels == 1 ? "" : "s");
  }
}

}  // namespace

std::vector<std::string> MarkControlCharacters(api::Diff& diff) {
  std::vector<std::string> marked;
  for (api::FileDiff& f : diff.files) {
    bool control = HasControlCharacters(f.path) || HasControlCharacters(f.patch);
    f.control_characters = control;
    if (control) {
      marked.push_back(f.path);
    }
  }
  return marked;
}

std::string FormatDiff(const api::Diff& diff, bool stat, bool terminal) {
  if (diff.files.empty()) {
    return "no changes\n";
  }
  // Files that make code run elsewhere (CI, build scripts, hooks) are shown apart.
  std::vector<const api::FileDiff*> normal;
  std::vector<const api::FileDiff*> sensitive;
  for (const api::FileDiff& f : diff.files) {
    (f.exec_sensitive ? sensitive : normal).push_back(&f);
  }
  std::string out;
  if (!normal.empty()) {
    AppendFiles(normal, stat, &out);
  }
  if (!sensitive.empty()) {
    absl::StrAppend(&out, normal.empty() ? "" : "\n",
                    "==> files that make code run elsewhere (apply needs --allow-exec-files):\n");
    for (const api::FileDiff* f : sensitive) {
      absl::StrAppend(&out, "    ", f->path, ": ", *f->exec_sensitive, "\n");
    }
    AppendFiles(sensitive, stat, &out);
  }
  // Everything above is printable but the guest's paths and patches: rendering the whole text
  // renders exactly theirs.
  return terminal ? ShowControlCharacters(out) : out;
}

}  // namespace abox::cli
