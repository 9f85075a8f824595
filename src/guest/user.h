// Who a command runs as: the unprivileged `agent` user by default, `root` on request. Reads
// /etc/passwd and /etc/group itself (no NSS: the agent is a static binary).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace abox::guest {

struct Identity {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, including the primary group
  std::string home;
  std::string shell;
};

// The uid used for `agent` when the image has no user of that name.
inline constexpr uid_t kAgentFallbackUid = 1000;
// Bounds on what we take from the files (they are ours, but keep parsing bounded anyway).
inline constexpr size_t kMaxAccountFileBytes = 4 << 20;
inline constexpr size_t kMaxGroups = 256;

// Resolves `user` ("" or "agent": the unprivileged user; "root") from the text of /etc/passwd
// and /etc/group. `agent` falls back to the passwd entry with uid 1000, and without one to a
// synthesized agent (uid/gid 1000, home "/"); root falls back to uid 0 with home /root.
Identity ResolveIdentity(absl::string_view user, absl::string_view passwd, absl::string_view group);

// ResolveIdentity over the real /etc/passwd and /etc/group (missing files read as empty).
Identity LookUpIdentity(absl::string_view user);

// The identity of this process (used when the agent cannot switch users, i.e. is not root).
Identity CurrentIdentity();

}  // namespace abox::guest
