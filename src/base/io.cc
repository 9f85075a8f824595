#include "src/base/io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::base {

absl::StatusOr<Pipe> MakePipe(int extra_flags) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | extra_flags) != 0) {
    return ErrnoError("pipe2");
  }
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

absl::Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, -1) < 0 && errno != EINTR) {
          return ErrnoError("poll(write)");
        }
        continue;
      }
      return ErrnoError("write");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> ReadSome(int fd, char* buf, size_t len) {
  for (;;) {
    ssize_t n = ::read(fd, buf, len);
    if (n >= 0) {
      return static_cast<size_t>(n);
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN) {
      return absl::UnavailableError("read would block");
    }
    return ErrnoError("read");
  }
}

absl::StatusOr<std::string> ReadAllFd(int fd, size_t limit) {
  std::string out;
  char buf[64 * 1024];
  for (;;) {
    ABOX_ASSIGN_OR_RETURN(size_t n, ReadSome(fd, buf, sizeof(buf)));
    if (n == 0) {
      return out;
    }
    if (out.size() + n > limit) {
      return absl::ResourceExhaustedError(absl::StrCat("more than ", limit, " bytes"));
    }
    out.append(buf, n);
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path, size_t limit) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return ErrnoError(absl::StrCat("open(", path, ")"));
  }
  auto data = ReadAllFd(fd.get(), limit);
  if (!data.ok()) {
    return Annotate(data.status(), absl::StrCat("reading ", path));
  }
  return data;
}

absl::Status WriteFileAtomic(const std::string& path, std::string_view data, int mode) {
  std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  std::string tmp = (dir / ("." + target.filename().string() + ".tmpXXXXXX")).string();
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd) {
    return ErrnoError(absl::StrCat("mkostemp(", tmp, ")"));
  }
  auto fail = [&](absl::Status s) {
    ::unlink(tmp.c_str());
    return s;
  };
  if (::fchmod(fd.get(), static_cast<mode_t>(mode)) != 0) {
    return fail(ErrnoError("fchmod"));
  }
  if (auto s = WriteAll(fd.get(), data); !s.ok()) {
    return fail(s);
  }
  if (::fsync(fd.get()) != 0) {
    return fail(ErrnoError("fsync"));
  }
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(ErrnoError(absl::StrCat("rename(", path, ")")));
  }
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd) {
    ::fsync(dfd.get());
  }
  return absl::OkStatus();
}

absl::Status SetNonBlocking(int fd, bool non_blocking) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) {
    return ErrnoError("fcntl(F_GETFL)");
  }
  flags = non_blocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) != 0) {
    return ErrnoError("fcntl(F_SETFL)");
  }
  return absl::OkStatus();
}

absl::Status CopyDataSparse(int in, int out, const std::string& what) {
  struct stat st {};
  if (::fstat(in, &st) != 0) {
    return ErrnoError(absl::StrCat("fstat(", what, ")"));
  }
  off_t pos = 0;
  std::string buf(1 << 20, '\0');
  while (pos < st.st_size) {
    off_t data = ::lseek(in, pos, SEEK_DATA);
    if (data < 0) {
      break;  // only a hole is left
    }
    off_t hole = ::lseek(in, data, SEEK_HOLE);
    if (hole < 0) {
      hole = st.st_size;
    }
    for (off_t at = data; at < hole;) {
      size_t want = static_cast<size_t>(std::min<off_t>(hole - at, static_cast<off_t>(buf.size())));
      ssize_t n = ::pread(in, buf.data(), want, at);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        return ErrnoError(absl::StrCat("read(", what, ")"));
      }
      for (ssize_t done = 0; done < n;) {
        ssize_t w = ::pwrite(out, buf.data() + done, static_cast<size_t>(n - done), at + done);
        if (w < 0 && errno == EINTR) {
          continue;
        }
        if (w <= 0) {
          return ErrnoError(absl::StrCat("write(copy of ", what, ")"));
        }
        done += w;
      }
      at += n;
    }
    pos = hole;
  }
  if (::ftruncate(out, st.st_size) != 0) {
    return ErrnoError(absl::StrCat("ftruncate(copy of ", what, ")"));
  }
  return absl::OkStatus();
}

absl::Status CopyFileSparse(const std::string& from, const std::string& to, unsigned mode) {
  UniqueFd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) {
    return ErrnoError(absl::StrCat("open(", from, ")"));
  }
  UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) {
    return ErrnoError(absl::StrCat("open(", to, ")"));
  }
  ABOX_RETURN_IF_ERROR(CopyDataSparse(in.get(), out.get(), from));
  if (::fchmod(out.get(), static_cast<mode_t>(mode)) != 0) {
    return ErrnoError(absl::StrCat("fchmod(", to, ")"));
  }
  return absl::OkStatus();
}

absl::Status SyncFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd || ::fsync(fd.get()) != 0) {
    return ErrnoError(absl::StrCat("fsync(", path, ")"));
  }
  return absl::OkStatus();
}

}  // namespace abox::base
