// Unix stream sockets by path, close-on-exec and non-blocking. Paths longer than sun_path (108
// bytes) work too: the socket is reached through /proc/self/fd/<dir fd>/<name>.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "src/base/unique_fd.h"

namespace abox::base {

// Connects to the listening socket at `path`. kNotFound when it does not exist, kUnavailable
// when nobody listens there (ECONNREFUSED: its server died), kResourceExhausted when the
// server lives but its backlog is full (EAGAIN).
[[nodiscard]] absl::StatusOr<UniqueFd> ConnectUnixSocket(const std::string& path);

// Creates, binds (mode 0600) and listens on a new socket at `path`; the file must not exist.
[[nodiscard]] absl::StatusOr<UniqueFd> ListenUnixSocket(const std::string& path, int backlog = 1);

}  // namespace abox::base
