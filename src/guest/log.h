// Logging for abox-guest: one line per event, "abox-guest: ..." on stderr (the VM console when
// the agent runs as PID 1). No logging library: the binary is static and tiny.
#pragma once

#include "absl/strings/string_view.h"

namespace abox::guest {

// Writes "abox-guest: <message>\n" to stderr in a single write() so concurrent lines do not mix.
void Log(absl::string_view message);

// The text for an errno value, e.g. "No such file or directory" (thread-safe, unlike strerror).
const char* ErrnoText(int err);

}  // namespace abox::guest
