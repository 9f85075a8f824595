#include "src/cli/systemd_unit.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace abox::cli {
namespace {

// One word for a unit file: '%' doubled (specifiers), '$' doubled where systemd would expand
// variables, and double quotes around words with spaces, quotes or backslashes.
std::string Word(const std::string& text, bool in_exec) {
  std::string escaped;
  bool quote = text.empty();
  for (char c : text) {
    if (c == '%') {
      escaped += "%%";
    } else if (c == '$' && in_exec) {
      escaped += "$$";
    } else if (c == '"' || c == '\\') {
      escaped += '\\';
      escaped += c;
      quote = true;
    } else {
      quote = quote || c == ' ' || c == '\t' || c == '\'' || c == ';';
      escaped += c;
    }
  }
  return quote ? absl::StrCat("\"", escaped, "\"") : escaped;
}

}  // namespace

std::string SystemdUnit(const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& env) {
  std::string exec;
  for (const std::string& arg : argv) {
    absl::StrAppend(&exec, exec.empty() ? "" : " ", Word(arg, /*in_exec=*/true));
  }
  std::string unit = absl::StrCat(
      "# aboxd, the abox daemon, as a systemd user service. Install it with\n"
      "#   abox daemon unit --install\n"
      "# or save this file as ~/.config/systemd/user/aboxd.service and run\n"
      "#   ",
      kSystemdEnableCommand,
      "\n"
      "[Unit]\n"
      "Description=abox daemon (aboxd): disposable QEMU microVM sandboxes\n"
      "\n"
      "[Service]\n"
      "Type=simple\n"
      "ExecStart=",
      exec, "\n");
  for (const auto& [key, value] : env) {
    absl::StrAppend(&unit, "Environment=", Word(absl::StrCat(key, "=", value), false), "\n");
  }
  absl::StrAppend(&unit,
                  "Restart=on-failure\n"
                  "RestartSec=2\n"
                  "\n"
                  "[Install]\n"
                  "WantedBy=default.target\n");
  return unit;
}

absl::StatusOr<std::string> SystemdUnitPath() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only use, nobody sets the environment.
  if (const char* config = std::getenv("XDG_CONFIG_HOME"); config != nullptr && config[0] == '/') {
    return absl::StrCat(config, "/systemd/user/aboxd.service");
  }
  const char* home = std::getenv("HOME");  // NOLINT(concurrency-mt-unsafe)
  std::string home_dir = home != nullptr ? home : "";
  if (home_dir.empty()) {
    struct passwd pw {};
    struct passwd* found = nullptr;
    char buf[4096];
    if (::getpwuid_r(::getuid(), &pw, buf, sizeof(buf), &found) == 0 && found != nullptr) {
      home_dir = found->pw_dir;
    }
  }
  if (home_dir.empty()) {
    return absl::FailedPreconditionError(
        "cannot find your home directory: set HOME (or XDG_CONFIG_HOME)");
  }
  return absl::StrCat(home_dir, "/.config/systemd/user/aboxd.service");
}

}  // namespace abox::cli
