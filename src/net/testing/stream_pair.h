// Test doubles for the stream layer (header-only, tests only): two FdStreams joined by a
// socketpair.
#pragma once

#include <sys/socket.h>

#include <cstdlib>
#include <memory>
#include <utility>

#include "src/net/fd_stream.h"

namespace abox::net::testing {

// Two connected non-blocking socket ends; aborts the test binary when they cannot be made.
inline std::pair<base::UniqueFd, base::UniqueFd> NonBlockingSocketPair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) {
    std::abort();
  }
  return {base::UniqueFd(fds[0]), base::UniqueFd(fds[1])};
}

struct StreamPair {
  std::unique_ptr<FdStream> a;
  std::unique_ptr<FdStream> b;
};

// `a` and `b` talk to each other. Writes give up after 10 s without progress, so a broken test
// fails instead of hanging.
inline StreamPair MakeStreamPair() {
  auto [x, y] = NonBlockingSocketPair();
  FdStream::Options options{.write_timeout = absl::Seconds(10)};
  StreamPair pair{*FdStream::Create(std::move(x), options),
                  *FdStream::Create(std::move(y), options)};
  return pair;
}

}  // namespace abox::net::testing
