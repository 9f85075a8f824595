#include "src/http/listen_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unix_socket.h"

namespace abox::http {
namespace {

namespace fs = std::filesystem;

// Creates the missing directories of `dir` (mode 0700) and checks who owns it: a directory
// another user controls could swap our socket for theirs under the clients' feet.
absl::Status PrepareDirectory(const fs::path& dir) {
  fs::path partial;
  for (const fs::path& part : dir) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return base::Annotate(base::ErrnoError(absl::StrCat("mkdir(", partial.string(), ")")),
                            "cannot create the socket directory; check its parent's permissions");
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("stat(", dir.string(), ")"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir.string(), " is not a directory; choose another socket path"));
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("socket directory ", dir.string(), " belongs to uid ", st.st_uid,
                     "; use a directory you own (the default is $XDG_RUNTIME_DIR/abox)"));
  }
  return absl::OkStatus();
}

// The pid recorded in a lock file, for messages ("" when unreadable).
std::string LockHolder(int lock_fd) {
  char buf[32] = {};
  ssize_t n = ::pread(lock_fd, buf, sizeof(buf) - 1, 0);
  int pid = 0;
  if (n > 0 && absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(buf, n)), &pid)) {
    return absl::StrCat(" (pid ", pid, ")");
  }
  return "";
}

absl::StatusOr<base::UniqueFd> TakeLock(const std::string& path) {
  std::string lock_path = path + ".lock";
  base::UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) {
    return base::ErrnoError(absl::StrCat("open(", lock_path, ")"));
  }
  int r;
  do {
    r = ::flock(fd.get(), LOCK_EX | LOCK_NB);
  } while (r != 0 && errno == EINTR);
  if (r != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::AlreadyExistsError(
          absl::StrCat("another aboxd", LockHolder(fd.get()), " already serves ", path,
                       "; stop it with `abox daemon stop` or give this one another socket path"));
    }
    return base::ErrnoError(absl::StrCat("flock(", lock_path, ")"));
  }
  std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd.get(), 0) != 0 || ::pwrite(fd.get(), pid.data(), pid.size(), 0) < 0) {
    return base::ErrnoError(absl::StrCat("write(", lock_path, ")"));
  }
  return fd;
}

// Removes a stale socket at `path`; refuses when something still answers there.
absl::Status ReplaceStaleSocket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return absl::OkStatus();
    }
    return base::ErrnoError(absl::StrCat("lstat(", path, ")"));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket; remove it or choose another socket path"));
  }
  absl::StatusOr<base::UniqueFd> probe = base::ConnectUnixSocket(path);
  if (absl::IsNotFound(probe.status())) {
    return absl::OkStatus();  // gone since the lstat
  }
  if (probe.ok() || absl::IsResourceExhausted(probe.status())) {  // alive (maybe busy)
    return absl::AlreadyExistsError(
        absl::StrCat("another server is listening on ", path,
                     "; stop it (`abox daemon stop`) or give this daemon another socket path"));
  }
  if (!absl::IsUnavailable(probe.status())) {
    return base::Annotate(probe.status(), "checking for a live daemon");
  }
  // Nobody listens: the daemon that made it died. We hold the lock, so no peer races us here.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return base::ErrnoError(absl::StrCat("unlink(stale socket ", path, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<UnixSocketLock> LockUnixSocket(const std::string& path) {
  if (path.empty() || path.back() == '/') {
    return absl::InvalidArgumentError(absl::StrCat("socket path \"", path, "\" names no file"));
  }
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(path), ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, ": ", ec.message()));
  }
  ABOX_RETURN_IF_ERROR(PrepareDirectory(p.parent_path()));
  UnixSocketLock lock;
  lock.path = p.string();
  ABOX_ASSIGN_OR_RETURN(lock.fd, TakeLock(lock.path));
  return lock;
}

absl::StatusOr<UnixListenSocket> ListenUnix(UnixSocketLock lock, int backlog) {
  if (!lock.fd) {
    return absl::InvalidArgumentError(
        absl::StrCat("internal: listening on ", lock.path, " without holding its lock"));
  }
  UnixListenSocket out;
  out.path = std::move(lock.path);
  out.lock = std::move(lock.fd);
  ABOX_RETURN_IF_ERROR(ReplaceStaleSocket(out.path));
  ABOX_ASSIGN_OR_RETURN(out.fd, base::ListenUnixSocket(out.path, backlog));
  struct stat st {};
  if (::lstat(out.path.c_str(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("lstat(", out.path, ")"));
  }
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  return out;
}

void RemoveUnixSocketFile(const UnixListenSocket& socket) {
  struct stat st {};
  if (socket.path.empty() || ::lstat(socket.path.c_str(), &st) != 0) {
    return;
  }
  if (S_ISSOCK(st.st_mode) && st.st_dev == socket.dev && st.st_ino == socket.ino) {
    ::unlink(socket.path.c_str());
  }
}

absl::StatusOr<base::UniqueFd> ListenLoopback(uint16_t port, int backlog, uint16_t* bound_port) {
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    return base::ErrnoError("socket(AF_INET)");
  }
  int one = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return base::ErrnoError("setsockopt(SO_REUSEADDR)");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // never a routable address: see auth.h
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EADDRINUSE) {
      return absl::AlreadyExistsError(
          absl::StrCat("127.0.0.1:", port,
                       " is already in use; choose another TCP port or stop the "
                       "program using it"));
    }
    return base::ErrnoError(absl::StrCat("bind(127.0.0.1:", port, ")"));
  }
  if (::listen(fd.get(), backlog) != 0) {
    return base::ErrnoError("listen(127.0.0.1)");
  }
  socklen_t len = sizeof(addr);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return base::ErrnoError("getsockname(127.0.0.1)");
  }
  *bound_port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace abox::http
