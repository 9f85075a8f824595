// Who may talk to aboxd: the unix socket's peer uid (SO_PEERCRED) and the TCP bearer token.
#pragma once

#include <sys/types.h>

#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::http {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// SO_PEERCRED of a connected unix socket: the credentials the peer had at connect() time.
[[nodiscard]] absl::StatusOr<PeerCredentials> GetPeerCredentials(int fd);

// kPermissionDenied unless the peer runs as `allowed_uid`. The socket file is 0600 in a 0700
// directory already; this check holds even when someone loosened those modes.
[[nodiscard]] absl::Status CheckPeerUid(const PeerCredentials& peer, uid_t allowed_uid);

// Compares in time that depends only on the lengths, not on where the bytes differ.
[[nodiscard]] bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Checks an Authorization header value ("Bearer <token>", scheme case-insensitive) against
// `token`. kUnauthenticated saying what to send when it is missing, malformed or wrong (and that
// the token is the one `server` was started with).
[[nodiscard]] absl::Status CheckBearerToken(std::optional<absl::string_view> authorization,
                                            absl::string_view token,
                                            absl::string_view server = "aboxd");

}  // namespace abox::http
