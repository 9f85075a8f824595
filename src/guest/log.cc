#include "src/guest/log.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace abox::guest {

void Log(absl::string_view message) {
  std::string line = absl::StrCat("abox-guest: ", message, "\n");
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;  // Nowhere to log to; never fail because of logging.
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

const char* ErrnoText(int err) {
  const char* text = ::strerrordesc_np(err);
  return text != nullptr ? text : "Unknown error";
}

}  // namespace abox::guest
