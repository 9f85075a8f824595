// DetectTemplate (`--template auto`): a template guessed from the marker files at the top of the
// repository. Only names are looked at (fstatat without following links): no file is read, so a
// huge or hostile file cannot slow or steer the guess beyond which ecosystems it picks.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/base/status_macros.h"
#include "src/template/project_template.h"
#include "src/template/template_values.h"

namespace abox::tmpl {
namespace {

constexpr const char* kVenv = "python3 -m venv .venv && ";

// What one ecosystem contributes, in the order ecosystems are listed in the result.
struct Ecosystem {
  std::string preset;
  std::vector<std::string> setup;
  std::string setup_allow;  // "" when no egress preset covers its registry
};

class Detector final {
 public:
  explicit Detector(int dir) : dir_(dir) {}

  ProjectTemplate Detect() {
    std::vector<Ecosystem> found;
    if (Seen("package.json")) {
      found.push_back(Node());
    }
    bool requirements = Seen("requirements.txt");
    bool pyproject = Seen("pyproject.toml");
    bool setup_py = Seen("setup.py");
    if (requirements || pyproject || setup_py) {
      // requirements.txt is the project's own pinned list; without one, the package itself.
      std::string install =
          requirements ? ".venv/bin/pip install -r requirements.txt" : ".venv/bin/pip install -e .";
      found.push_back({"python", {absl::StrCat(kVenv, install)}, "preset:pypi"});
    }
    if (Seen("go.mod")) {
      found.push_back({"go", {"go mod download"}, "preset:go"});
    }
    if (Seen("Cargo.toml")) {
      found.push_back({"rust", {"cargo fetch"}, "preset:crates"});
    }
    bool pom = Seen("pom.xml");
    bool gradle = Seen("build.gradle");
    bool gradle_kts = Seen("build.gradle.kts");
    if (pom || gradle || gradle_kts) {
      found.push_back({"java", {}, ""});
      out_.notes.push_back(
          "Maven Central has no egress preset yet, so no Java dependencies are downloaded at "
          "setup; if the build needs them, add the repository hosts (e.g. repo.maven.apache.org) "
          "to [egress] allow in .abox.toml (needs --allow-template-egress)");
    }
    if (found.size() == 1) {
      out_.preset = found[0].preset;
    } else if (found.size() > 1) {
      out_.preset = "full";
    }
    for (Ecosystem& e : found) {
      for (std::string& command : e.setup) {
        out_.setup.push_back(std::move(command));
      }
      if (!e.setup_allow.empty()) {
        out_.setup_allow.push_back(e.setup_allow);
      }
    }
    out_.source = out_.detected.empty()
                      ? "auto"
                      : absl::StrCat("auto (", absl::StrJoin(out_.detected, ", "), ")");
    return std::move(out_);
  }

 private:
  Ecosystem Node() {
    bool lock = Seen("package-lock.json");
    if (Seen("yarn.lock")) {
      out_.notes.push_back(
          "yarn.lock found, but the setup uses npm, which does not read it; if the image has "
          "yarn, write setup = [\"yarn install --frozen-lockfile\"] in .abox.toml");
    }
    if (Seen("pnpm-lock.yaml")) {
      out_.notes.push_back(
          "pnpm-lock.yaml found, but the setup uses npm, which does not read it; if the image "
          "has pnpm, write setup = [\"pnpm install --frozen-lockfile\"] in .abox.toml");
    }
    // npm ci installs exactly the lock file's tree; without one, npm install resolves anew.
    return {"node", {lock ? "npm ci" : "npm install"}, "preset:npm"};
  }

  // Whether `name` is a regular file at the top level (recorded in `detected`). A symbolic
  // link is not followed, so it cannot point the guess outside the repository; it is noted.
  bool Seen(const char* name) {
    struct stat st {};
    if (::fstatat(dir_, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return false;
    }
    if (S_ISLNK(st.st_mode)) {
      out_.notes.push_back(absl::StrCat(
          name, " is a symbolic link, which auto-detection does not follow; it was ignored"));
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      return false;
    }
    out_.detected.emplace_back(name);
    return true;
  }

  int dir_;
  ProjectTemplate out_;
};

}  // namespace

absl::StatusOr<ProjectTemplate> DetectTemplate(const std::filesystem::path& workspace_dir) {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd dir,
                        OpenWorkspace(workspace_dir, "detect its template (--template auto)"));
  return Detector(dir.get()).Detect();
}

}  // namespace abox::tmpl
