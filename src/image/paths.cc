#include "src/image/paths.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace abox::image {
namespace {

absl::StatusOr<std::filesystem::path> HomeDir(const GetEnvFn& getenv_fn) {
  const char* home = getenv_fn("HOME");
  if (home != nullptr && home[0] != '\0') {
    return std::filesystem::path(home);
  }
  struct passwd pw {};
  struct passwd* result = nullptr;
  char buf[4096];
  if (::getpwuid_r(::getuid(), &pw, buf, sizeof(buf), &result) == 0 && result != nullptr &&
      result->pw_dir != nullptr && result->pw_dir[0] != '\0') {
    return std::filesystem::path(result->pw_dir);
  }
  return absl::FailedPreconditionError(
      "cannot find the home directory: $HOME is unset; set HOME or ABOX_HOME and ABOX_CACHE_DIR");
}

// Returns the first set variable among `vars`, or `fallback` (a path under $HOME).
absl::StatusOr<std::filesystem::path> Pick(const GetEnvFn& getenv_fn, const char* primary,
                                           const char* xdg, const char* xdg_default) {
  if (const char* v = getenv_fn(primary); v != nullptr && v[0] != '\0') {
    std::filesystem::path p(v);
    if (!p.is_absolute()) {
      return absl::InvalidArgumentError(
          absl::StrCat("$", primary, "=", v, " is not an absolute path: set it to one"));
    }
    return p;
  }
  if (const char* v = getenv_fn(xdg); v != nullptr && v[0] != '\0') {
    std::filesystem::path p(v);
    if (p.is_absolute()) {  // The XDG spec says to ignore relative values.
      return p / "abox";
    }
  }
  auto home = HomeDir(getenv_fn);
  if (!home.ok()) {
    return home.status();
  }
  return *home / xdg_default / "abox";
}

}  // namespace

absl::StatusOr<Paths> ResolvePaths() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only use, nobody sets the environment.
  return ResolvePaths([](const char* name) { return ::getenv(name); });
}

absl::StatusOr<Paths> ResolvePaths(const GetEnvFn& getenv_fn) {
  Paths paths;
  auto home = Pick(getenv_fn, "ABOX_HOME", "XDG_DATA_HOME", ".local/share");
  if (!home.ok()) {
    return home.status();
  }
  auto cache = Pick(getenv_fn, "ABOX_CACHE_DIR", "XDG_CACHE_HOME", ".cache");
  if (!cache.ok()) {
    return cache.status();
  }
  paths.home = home->lexically_normal();
  paths.cache_dir = cache->lexically_normal();
  return paths;
}

absl::StatusOr<std::filesystem::path> ResolveSocketPath() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only use, nobody sets the environment.
  return ResolveSocketPath([](const char* name) { return ::getenv(name); });
}

absl::StatusOr<std::filesystem::path> ResolveSocketPath(const GetEnvFn& getenv_fn) {
  if (const char* v = getenv_fn("ABOX_SOCKET"); v != nullptr && v[0] != '\0') {
    std::filesystem::path p(v);
    if (!p.is_absolute()) {
      return absl::InvalidArgumentError(
          absl::StrCat("$ABOX_SOCKET=", v, " is not an absolute path: set it to one"));
    }
    return p.lexically_normal();
  }
  if (const char* v = getenv_fn("XDG_RUNTIME_DIR"); v != nullptr && v[0] != '\0') {
    std::filesystem::path p(v);
    if (p.is_absolute()) {  // The XDG spec says to ignore relative values.
      return (p / "abox" / "aboxd.sock").lexically_normal();
    }
  }
  // Not /tmp/abox-<uid>: another user can create that directory first. $ABOX_HOME is ours.
  auto home = Pick(getenv_fn, "ABOX_HOME", "XDG_DATA_HOME", ".local/share");
  if (!home.ok()) {
    return home.status();
  }
  return home->lexically_normal() / "run" / "aboxd.sock";
}

absl::Status ValidateImageName(const std::string& name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid image name '", name, "': ", why,
                     " (use 1-64 characters of a-z, 0-9, '.', '_', '-', starting with a letter "
                     "or digit)"));
  };
  if (name.empty() || name.size() > 64) {
    return bad("wrong length");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return bad("bad character");
    }
  }
  if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9'))) {
    return bad("bad first character");
  }
  return absl::OkStatus();
}

}  // namespace abox::image
