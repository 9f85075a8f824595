#include "src/base/unix_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::base {
namespace {

// A sockaddr for `path`, opening its directory (kept in `dir`) when the path is too long.
absl::StatusOr<sockaddr_un> Address(const std::string& path, UniqueFd& dir) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string target = path;
  if (target.size() >= sizeof(addr.sun_path)) {
    std::filesystem::path p(path);
    dir.reset(::open(p.parent_path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir) {
      return ErrnoError(absl::StrCat("open(", p.parent_path().string(), ")"));
    }
    target = absl::StrCat("/proc/self/fd/", dir.get(), "/", p.filename().string());
    if (target.size() >= sizeof(addr.sun_path)) {
      return absl::InvalidArgumentError(
          absl::StrCat("socket file name too long: ", path, "; choose a shorter name"));
    }
  }
  std::memcpy(addr.sun_path, target.c_str(), target.size() + 1);
  return addr;
}

absl::StatusOr<UniqueFd> NewSocket() {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    return ErrnoError("socket(AF_UNIX)");
  }
  return fd;
}

}  // namespace

absl::StatusOr<UniqueFd> ConnectUnixSocket(const std::string& path) {
  UniqueFd dir;
  ABOX_ASSIGN_OR_RETURN(sockaddr_un addr, Address(path, dir));
  ABOX_ASSIGN_OR_RETURN(UniqueFd fd, NewSocket());
  int r;
  do {
    r = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (r != 0 && errno == EINTR);
  if (r != 0) {
    int err = errno;
    std::string call = absl::StrCat("connect(", path, ")");
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat(call, ": no such socket"));
    }
    if (err == ECONNREFUSED) {
      return absl::UnavailableError(ErrnoError(call, err).message());
    }
    if (err == EAGAIN) {
      return absl::ResourceExhaustedError(
          absl::StrCat(call, ": the server's backlog is full; retry in a moment"));
    }
    return ErrnoError(call, err);
  }
  return fd;
}

absl::StatusOr<UniqueFd> ListenUnixSocket(const std::string& path, int backlog) {
  UniqueFd dir;
  ABOX_ASSIGN_OR_RETURN(sockaddr_un addr, Address(path, dir));
  ABOX_ASSIGN_OR_RETURN(UniqueFd fd, NewSocket());
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoError(absl::StrCat("bind(", path, ")"));
  }
  // Owner only. fchmod on the socket fd does not reach the file, and changing the umask would
  // race with other threads; callers bind in a directory only they can enter (0700), so the
  // moment before this is not exposed.
  if (::chmod(addr.sun_path, 0600) != 0) {
    return ErrnoError(absl::StrCat("chmod(", path, ")"));
  }
  if (::listen(fd.get(), backlog) != 0) {
    return ErrnoError(absl::StrCat("listen(", path, ")"));
  }
  return fd;
}

}  // namespace abox::base
