#include "src/http/auth.h"

#include <sys/socket.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::http {

absl::StatusOr<PeerCredentials> GetPeerCredentials(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return base::ErrnoError("getsockopt(SO_PEERCRED)");
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

absl::Status CheckPeerUid(const PeerCredentials& peer, uid_t allowed_uid) {
  if (peer.uid == allowed_uid) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "connection from uid ", peer.uid, " (pid ", peer.pid, ") refused: aboxd serves only uid ",
      allowed_uid, "; each user runs their own daemon"));
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Walk the expected length whatever `a` is, so timing reveals neither a prefix nor the size.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    unsigned char ca = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff = diff | (ca ^ static_cast<unsigned char>(b[i]));
  }
  return diff == 0;
}

absl::Status CheckBearerToken(std::optional<absl::string_view> authorization,
                              absl::string_view token, absl::string_view server) {
  const std::string kHowTo =
      absl::StrCat("send the header \"Authorization: Bearer <token>\" with the token ", server,
                   " was started with");
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(absl::StrCat("missing bearer token: ", kHowTo));
  }
  absl::string_view value = absl::StripAsciiWhitespace(*authorization);
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() < kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return absl::UnauthenticatedError(
        absl::StrCat("Authorization is not a bearer token: ", kHowTo));
  }
  absl::string_view presented = absl::StripLeadingAsciiWhitespace(value.substr(kScheme.size()));
  if (token.empty() || !ConstantTimeEquals(presented, token)) {
    return absl::UnauthenticatedError(absl::StrCat("wrong bearer token: ", kHowTo));
  }
  return absl::OkStatus();
}

}  // namespace abox::http
