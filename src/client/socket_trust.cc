#include "src/client/socket_trust.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "src/base/status_macros.h"

namespace abox::client {
namespace {

constexpr absl::string_view kNothingListeningUrl = "abox.dev/nothing-listening";

// What to do about a socket that is not provably the user's own aboxd.
constexpr absl::string_view kWhatToDo =
    "set ABOX_SOCKET to a socket in a directory of your own with mode 0700, or unset it to use "
    "the default ($XDG_RUNTIME_DIR/abox, else $ABOX_HOME/run), which aboxd creates so";

}  // namespace

absl::Status MarkNothingListening(absl::Status status) {
  status.SetPayload(kNothingListeningUrl, absl::Cord("1"));
  return status;
}

bool HasNothingListeningMark(const absl::Status& status) {
  return status.GetPayload(kNothingListeningUrl).has_value();
}

absl::StatusOr<PeerCredentials> SocketPeer(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return base::ErrnoError("getsockopt(SO_PEERCRED)");
  }
  return PeerCredentials{.pid = cred.pid, .uid = cred.uid, .gid = cred.gid};
}

absl::Status CheckSocketDirectory(int dir_fd, const std::string& dir,
                                  const std::string& socket_path, uid_t uid) {
  struct stat st {};
  if (::fstat(dir_fd, &st) != 0) {
    return base::ErrnoError(absl::StrCat("fstat(", dir, ")"));
  }
  if (st.st_uid != uid) {
    return absl::PermissionDeniedError(
        absl::StrCat("refusing aboxd's socket ", socket_path, ": its directory ", dir,
                     " belongs to uid ", st.st_uid, ", not to you (uid ", uid,
                     "), so whatever listens there may be another user's server; ", kWhatToDo));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "refusing aboxd's socket %s: its directory %s has mode %04o, open to other users, who "
        "could put their own server in its place; run `chmod 700 %s` if it is yours and holds "
        "nothing of theirs, or %s",
        socket_path, dir, st.st_mode & 07777, dir, kWhatToDo));
  }
  return absl::OkStatus();
}

absl::Status CheckSocketPeer(int fd, const std::string& socket_path, uid_t uid) {
  ABOX_ASSIGN_OR_RETURN(PeerCredentials peer, SocketPeer(fd));
  if (peer.uid != uid) {
    return absl::PermissionDeniedError(absl::StrCat(
        "refusing the server on ", socket_path, ": it runs as uid ", peer.uid,
        peer.pid > 0 ? absl::StrCat(" (pid ", peer.pid, ")") : "", ", not as you (uid ", uid,
        "), so it is not your aboxd and abox sends it nothing; stop that process or remove the "
        "socket if you may, or ",
        kWhatToDo));
  }
  return absl::OkStatus();
}

absl::StatusOr<base::UniqueFd> ConnectToOwnServer(const std::string& path, absl::Time deadline,
                                                  PeerCredentials* peer) {
  std::filesystem::path p(path);
  std::string dir = p.parent_path().string();
  std::string name = p.filename().string();
  if (dir.empty() || name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket path \"", path, "\" is not an absolute path to a file"));
  }
  uid_t uid = ::geteuid();
  // Through the directory's descriptor, always: the directory checked is the one connected
  // through, even if its name is swapped meanwhile (and paths longer than sun_path work).
  base::UniqueFd dir_fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd) {
    int err = errno;
    absl::Status s = base::ErrnoError(absl::StrCat("open(", dir, ")"), err);
    return err == ENOENT ? MarkNothingListening(std::move(s)) : s;
  }
  ABOX_RETURN_IF_ERROR(CheckSocketDirectory(dir_fd.get(), dir, path, uid));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string target = absl::StrCat("/proc/self/fd/", dir_fd.get(), "/", name);
  if (target.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket file name too long: ", path, "; choose a shorter name"));
  }
  std::memcpy(addr.sun_path, target.c_str(), target.size() + 1);
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    return base::ErrnoError("socket(AF_UNIX)");
  }
  for (;;) {
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
      break;
    }
    int err = errno;
    if (err == EINTR) {
      continue;
    }
    if (err == EAGAIN && absl::Now() < deadline) {
      // The daemon's accept backlog is full: it is alive but busy. Try again shortly.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    absl::Status s = base::ErrnoError(absl::StrCat("connect(", path, ")"), err);
    return err == ENOENT || err == ECONNREFUSED ? MarkNothingListening(std::move(s)) : s;
  }
  // Before a byte goes out: the request itself may carry what another user must not see.
  ABOX_RETURN_IF_ERROR(CheckSocketPeer(fd.get(), path, uid));
  if (peer != nullptr) {
    ABOX_ASSIGN_OR_RETURN(*peer, SocketPeer(fd.get()));
  }
  return fd;
}

absl::Status VerifyAboxdProcess(pid_t pid, uid_t uid, const std::string& expected_binary) {
  if (pid <= 0) {
    return absl::FailedPreconditionError(
        "the server on aboxd's socket runs in a pid namespace this process cannot see; stop it "
        "from there");
  }
  std::string proc = absl::StrCat("/proc/", pid);
  struct stat st {};
  if (::stat(proc.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("process ", pid, " is gone"));
    }
    return base::ErrnoError(absl::StrCat("stat(", proc, ")"));
  }
  if (st.st_uid != uid) {
    return absl::PermissionDeniedError(absl::StrCat("process ", pid, " belongs to uid ", st.st_uid,
                                                    ", not to you (uid ", uid,
                                                    "); abox signals only your own aboxd"));
  }
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink(proc + "/exe", ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot tell which program process ", pid, " runs (", proc,
                     "/exe: ", ec.message(), "); abox signals only a process it knows is aboxd"));
  }
  // An executable replaced since it started (an upgrade) reads "<path> (deleted)".
  std::string exe_path(absl::StripSuffix(exe.string(), " (deleted)"));
  bool is_aboxd = std::filesystem::path(exe_path).filename() == "aboxd";
  if (!is_aboxd && !expected_binary.empty()) {
    std::filesystem::path expected = std::filesystem::weakly_canonical(expected_binary, ec);
    is_aboxd = !ec && expected.string() == exe_path;
  }
  if (!is_aboxd) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the server on aboxd's socket is process ", pid, " running ", exe_path,
        ", which is not aboxd, so abox does not signal it; stop it yourself if you know it"));
  }
  return absl::OkStatus();
}

}  // namespace abox::client
