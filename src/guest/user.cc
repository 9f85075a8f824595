#include "src/guest/user.h"

#include <unistd.h>

#include <algorithm>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/io.h"

namespace abox::guest {
namespace {

struct PasswdEntry {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
  std::string shell;
};

// Parses "name:x:uid:gid:gecos:home:shell" lines; malformed lines are skipped.
std::vector<PasswdEntry> ParsePasswd(absl::string_view text) {
  std::vector<PasswdEntry> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ':');
    if (f.size() != 7 || f[0].empty()) {
      continue;
    }
    PasswdEntry e;
    uint32_t uid = 0;
    uint32_t gid = 0;
    if (!absl::SimpleAtoi(f[2], &uid) || !absl::SimpleAtoi(f[3], &gid)) {
      continue;
    }
    e.name = std::string(f[0]);
    e.uid = uid;
    e.gid = gid;
    e.home = std::string(f[5]);
    e.shell = std::string(f[6]);
    out.push_back(std::move(e));
  }
  return out;
}

// Supplementary groups of `name` from "group:x:gid:member,member" lines, plus `primary`.
std::vector<gid_t> GroupsOf(absl::string_view name, gid_t primary, absl::string_view text) {
  std::vector<gid_t> groups = {primary};
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ':');
    uint32_t gid = 0;
    if (f.size() != 4 || !absl::SimpleAtoi(f[2], &gid)) {
      continue;
    }
    for (absl::string_view member : absl::StrSplit(f[3], ',')) {
      if (member == name && std::find(groups.begin(), groups.end(), gid) == groups.end() &&
          groups.size() < kMaxGroups) {
        groups.push_back(gid);
      }
    }
  }
  return groups;
}

Identity FromEntry(const PasswdEntry& e, absl::string_view group) {
  Identity id;
  id.name = e.name;
  id.uid = e.uid;
  id.gid = e.gid;
  id.groups = GroupsOf(e.name, e.gid, group);
  id.home = e.home.empty() ? "/" : e.home;
  id.shell = e.shell.empty() ? "/bin/sh" : e.shell;
  return id;
}

std::string ReadOrEmpty(const std::string& path) {
  auto text = base::ReadFile(path, kMaxAccountFileBytes);
  return text.ok() ? *std::move(text) : std::string();
}

}  // namespace

Identity ResolveIdentity(absl::string_view user, absl::string_view passwd,
                         absl::string_view group) {
  std::vector<PasswdEntry> entries = ParsePasswd(passwd);
  auto by_name = [&](absl::string_view name) -> std::optional<PasswdEntry> {
    for (const auto& e : entries) {
      if (e.name == name) {
        return e;
      }
    }
    return std::nullopt;
  };
  if (user == "root") {
    if (auto e = by_name("root"); e && e->uid == 0) {
      return FromEntry(*e, group);
    }
    return Identity{"root", 0, 0, {0}, "/root", "/bin/sh"};
  }
  if (auto e = by_name("agent")) {
    return FromEntry(*e, group);
  }
  for (const auto& e : entries) {
    if (e.uid == kAgentFallbackUid) {
      return FromEntry(e, group);
    }
  }
  return Identity{"agent", kAgentFallbackUid, kAgentFallbackUid, {kAgentFallbackUid},
                  "/",     "/bin/sh"};
}

Identity LookUpIdentity(absl::string_view user) {
  return ResolveIdentity(user, ReadOrEmpty("/etc/passwd"), ReadOrEmpty("/etc/group"));
}

Identity CurrentIdentity() {
  uid_t uid = ::getuid();
  for (const auto& e : ParsePasswd(ReadOrEmpty("/etc/passwd"))) {
    if (e.uid == uid) {
      Identity id = FromEntry(e, "");
      id.gid = ::getgid();
      id.groups.clear();
      return id;
    }
  }
  return Identity{absl::StrCat(uid), uid, ::getgid(), {}, "/", "/bin/sh"};
}

}  // namespace abox::guest
