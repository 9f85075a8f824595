#include "src/cli/diff_format.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/cli/terminal_text.h"
#include "src/client/json_fields.h"

namespace abox::cli {
namespace {

using client::JsonBool;
using client::JsonInt;
using client::JsonMember;
using client::JsonString;

constexpr char kControlFlag[] = "  [control characters]";

// The patches, or the --stat lines and their summary, of `list`.
void AppendFiles(const std::vector<const nlohmann::json*>& list, bool stat, std::string* out) {
  long long adds = 0;
  long long dels = 0;
  for (const nlohmann::json* f : list) {
    if (!stat) {
      absl::StrAppend(out, JsonString(*f, "patch"));
      continue;
    }
    long long a = JsonInt(*f, "additions").value_or(0);
    long long d = JsonInt(*f, "deletions").value_or(0);
    adds += a;
    dels += d;
    std::string change = JsonBool(*f, "binary")
                             ? "Bin"
                             : absl::StrCat(a + d, " ", std::string(std::clamp(a, 0LL, 40LL), '+'),
                                            std::string(std::clamp(d, 0LL, 40LL), '-'));
    absl::StrAppendFormat(out, " %-50s | %s%s\n", JsonString(*f, "path"), change,
                          JsonBool(*f, "control_characters") ? kControlFlag : "");
  }
  if (stat) {
    absl::StrAppendFormat(out, " %d file%s changed, %d insertion%s(+), %d deletion%s(-)\n",
                          list.size(), list.size() == 1 ? "" : "s", adds, adds == 1 ? "" : "s",
                          dels, dels == 1 ? "" : "s");
  }
}

}  // namespace

std::vector<std::string> MarkControlCharacters(nlohmann::json& diff) {
  std::vector<std::string> marked;
  nlohmann::json* files = diff.is_object() && diff.contains("files") ? &diff["files"] : nullptr;
  if (files == nullptr || !files->is_array()) {
    return marked;
  }
  for (nlohmann::json& f : *files) {
    if (!f.is_object()) {
      continue;
    }
    std::string path = JsonString(f, "path");
    bool control = HasControlCharacters(path) || HasControlCharacters(JsonString(f, "patch"));
    f["control_characters"] = control;
    if (control) {
      marked.push_back(std::move(path));
    }
  }
  return marked;
}

std::string FormatDiff(const nlohmann::json& diff, bool stat, bool terminal) {
  const nlohmann::json* files = JsonMember(diff, "files");
  if (files == nullptr || !files->is_array() || files->empty()) {
    return "no changes\n";
  }
  // Files that make code run elsewhere (CI, build scripts, hooks) are shown apart.
  std::vector<const nlohmann::json*> normal;
  std::vector<const nlohmann::json*> sensitive;
  for (const nlohmann::json& f : *files) {
    (JsonMember(f, "exec_sensitive") != nullptr ? sensitive : normal).push_back(&f);
  }
  std::string out;
  if (!normal.empty()) {
    AppendFiles(normal, stat, &out);
  }
  if (!sensitive.empty()) {
    absl::StrAppend(&out, normal.empty() ? "" : "\n",
                    "==> files that make code run elsewhere (apply needs --allow-exec-files):\n");
    for (const nlohmann::json* f : sensitive) {
      absl::StrAppend(&out, "    ", JsonString(*f, "path"), ": ", JsonString(*f, "exec_sensitive"),
                      "\n");
    }
    AppendFiles(sensitive, stat, &out);
  }
  // Everything above is printable but the guest's paths and patches: rendering the whole text
  // renders exactly theirs.
  return terminal ? ShowControlCharacters(out) : out;
}

}  // namespace abox::cli
