#include "src/base/host_layout.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace abox::base {
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

absl::StatusOr<HostLayout> ResolveHostLayout() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only use, nobody sets the environment.
  return ResolveHostLayout([](const char* name) { return ::getenv(name); });
}

absl::StatusOr<HostLayout> ResolveHostLayout(const GetEnvFn& getenv_fn) {
  HostLayout paths;
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
}  // namespace abox::base
