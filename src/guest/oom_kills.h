// Counting the guest kernel's OOM kills during a command: the "oom_kill" line of /proc/vmstat
// (Linux 4.13+) read when the command starts and when its stream ends. The counter is VM-wide:
// a kill during a command is counted even when the killed process was not the command's (another
// exec running at the same time, a daemon of the image). That is simpler and works for every
// exec, with or without a cgroup of its own (exec_cgroup.h, kill_leftovers only); in a sandbox
// that runs one command at a time it is exact, and it is only ever used to explain an exit, never
// to decide anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace abox::guest {

inline constexpr char kVmstatPath[] = "/proc/vmstat";

// The value of the "oom_kill" line of /proc/vmstat's text; nullopt when there is none (an older
// kernel) or it is not a number.
[[nodiscard]] std::optional<uint64_t> ParseOomKillCounter(absl::string_view vmstat);

// Reads `path` (a /proc/vmstat) and parses it; nullopt when it cannot be read. An empty path is
// "not counted" (the agent outside a VM, where the counter would be the host's).
[[nodiscard]] std::optional<uint64_t> ReadOomKillCounter(const std::string& path);

// The kills between two readings, at most proto::kMaxOomKills; 0 when either reading is missing
// or the counter went backwards (it never does; a guest root rewriting files is not believed).
[[nodiscard]] uint32_t OomKillsBetween(std::optional<uint64_t> before,
                                       std::optional<uint64_t> after);

}  // namespace abox::guest
