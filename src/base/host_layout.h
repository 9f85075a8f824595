// Where abox keeps its files on the host (images, sandboxes, state, logs, the socket): resolved
// once from the environment by whoever starts (aboxd, abox) and passed on from there.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace abox::base {

// Host directories. Plain data; resolve once with ResolveHostLayout().
struct HostLayout {
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
  // home/sandboxes: one run dir per running VM.
  [[nodiscard]] std::filesystem::path SandboxesDir() const { return home / "sandboxes"; }
  // home/sandboxes/<id>
  [[nodiscard]] std::filesystem::path SandboxRunDir(const std::string& id) const {
    return SandboxesDir() / id;
  }
  // home/logs: console logs kept from failed sandboxes.
  [[nodiscard]] std::filesystem::path KeptLogsDir() const { return home / "logs"; }
  // home/logs/<id>-console.log
  [[nodiscard]] std::filesystem::path KeptConsoleLog(const std::string& id) const {
    return KeptLogsDir() / (id + "-console.log");
  }
  // home/state.db: aboxd's SQLite state.
  [[nodiscard]] std::filesystem::path StateDatabase() const { return home / "state.db"; }
};

// Returns the value of an environment variable or nullptr; injectable for tests.
using GetEnvFn = std::function<const char*(const char*)>;

// Resolves the layout from the environment: ABOX_HOME, else $XDG_DATA_HOME/abox, else
// ~/.local/share/abox; ABOX_CACHE_DIR, else $XDG_CACHE_HOME/abox, else ~/.cache/abox. Relative
// values are rejected (they would depend on the current directory). Does no I/O besides the
// password database lookup when $HOME is unset.
[[nodiscard]] absl::StatusOr<HostLayout> ResolveHostLayout();
[[nodiscard]] absl::StatusOr<HostLayout> ResolveHostLayout(const GetEnvFn& getenv_fn);

// Where aboxd listens and clients connect: $ABOX_SOCKET if set (absolute), else
// $XDG_RUNTIME_DIR/abox/aboxd.sock, else $ABOX_HOME/run/aboxd.sock (ResolveHostLayout's home; never
// a shared directory such as /tmp, where another user could create it first). aboxd creates the
// directory 0700; clients refuse one that is not the user's own with mode 0700. A path longer
// than a socket address holds (107 bytes) still works for abox and aboxd (they reach it through
// the directory's descriptor), but not for other tools such as `curl --unix-socket`.
[[nodiscard]] absl::StatusOr<std::filesystem::path> ResolveSocketPath();
[[nodiscard]] absl::StatusOr<std::filesystem::path> ResolveSocketPath(const GetEnvFn& getenv_fn);

}  // namespace abox::base
