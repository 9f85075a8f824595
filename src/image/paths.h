// Where abox keeps images and its build cache on the host.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace abox::image {

// Host directories used by images. Plain data; resolve once with ResolvePaths().
struct Paths {
  // $ABOX_HOME (default ~/.local/share/abox): images/, sandboxes/, state.db …
  std::filesystem::path home;
  // Build cache (default $XDG_CACHE_HOME/abox or ~/.cache/abox; env ABOX_CACHE_DIR). Holds the
  // expensive rootfs/kernel builds keyed by their inputs, and build logs. Never inside a checkout.
  std::filesystem::path cache_dir;

  // home/images
  [[nodiscard]] std::filesystem::path ImagesDir() const { return home / "images"; }
  // home/images/<name>
  [[nodiscard]] std::filesystem::path ImageDir(const std::string& name) const {
    return ImagesDir() / name;
  }
  // cache_dir/logs: build logs (mmdebstrap output).
  [[nodiscard]] std::filesystem::path LogsDir() const { return cache_dir / "logs"; }
};

// Returns the value of an environment variable or nullptr; injectable for tests.
using GetEnvFn = std::function<const char*(const char*)>;

// Resolves Paths from the environment: ABOX_HOME, else $XDG_DATA_HOME/abox, else
// ~/.local/share/abox; ABOX_CACHE_DIR, else $XDG_CACHE_HOME/abox, else ~/.cache/abox. Relative
// values are rejected (they would depend on the current directory). Does no I/O besides the
// password database lookup when $HOME is unset.
[[nodiscard]] absl::StatusOr<Paths> ResolvePaths();
[[nodiscard]] absl::StatusOr<Paths> ResolvePaths(const GetEnvFn& getenv_fn);

// Where aboxd listens and clients connect: $ABOX_SOCKET if set (absolute), else
// $XDG_RUNTIME_DIR/abox/aboxd.sock, else $ABOX_HOME/run/aboxd.sock (ResolvePaths' home; never a
// shared directory such as /tmp, where another user could create it first). aboxd creates the
// directory 0700; clients refuse one that is not the user's own with mode 0700. A path longer
// than a socket address holds (107 bytes) still works for abox and aboxd (they reach it through
// the directory's descriptor), but not for other tools such as `curl --unix-socket`.
[[nodiscard]] absl::StatusOr<std::filesystem::path> ResolveSocketPath();
[[nodiscard]] absl::StatusOr<std::filesystem::path> ResolveSocketPath(const GetEnvFn& getenv_fn);

// Image names become directory names: 1-64 chars of [a-z0-9._-], starting with [a-z0-9].
[[nodiscard]] absl::Status ValidateImageName(const std::string& name);

}  // namespace abox::image
