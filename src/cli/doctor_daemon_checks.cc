// `abox doctor`'s daemon checks: who can reach aboxd (socket, its directory, a TCP listener and
// its token) and who can read its state.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/status_macros.h"
#include "src/cli/doctor_checks.h"

namespace abox::cli {
namespace {

constexpr char kDaemon[] = "daemon";
constexpr char kStartDaemon[] = "start it with `abox daemon start` (other commands start it too)";

Check Make(std::string name, CheckStatus status, std::string reason, std::string fix = "") {
  return Check{kDaemon, std::move(name), status, std::move(reason), std::move(fix)};
}

std::string Mode(const struct stat& st) { return absl::StrFormat("%04o", st.st_mode & 07777); }

// An owner-only path: owned by the user, nothing for group or others.
bool OwnerOnly(const struct stat& st, uid_t euid) {
  return st.st_uid == euid && (st.st_mode & 077) == 0;
}

Check SocketDirectoryCheck(const HostView& host, const DaemonFacts& f) {
  std::string dir = std::filesystem::path(f.socket_path).parent_path().string();
  absl::StatusOr<struct stat> st = host.Lstat(dir);
  if (!st.ok()) {
    return Make("daemon.socket_dir", CheckStatus::kInfo,
                absl::StrCat(dir, " does not exist yet (aboxd creates it 0700)"));
  }
  if (!S_ISDIR(st->st_mode) || !OwnerOnly(*st, host.euid)) {
    return Make("daemon.socket_dir", CheckStatus::kFail,
                absl::StrCat(dir, " is uid ", st->st_uid, " mode ", Mode(*st),
                             ": abox refuses a socket directory that is not yours with mode 0700"),
                absl::StrCat("chmod 700 ", dir, " (and chown it to yourself), or set ABOX_SOCKET"));
  }
  return Make("daemon.socket_dir", CheckStatus::kPass,
              absl::StrCat(dir, ": yours, mode ", Mode(*st)));
}

Check SocketCheck(const HostView& host, const DaemonFacts& f) {
  absl::StatusOr<struct stat> st = host.Lstat(f.socket_path);
  if (!st.ok()) {
    return Make("daemon.socket", CheckStatus::kInfo, absl::StrCat("no socket at ", f.socket_path));
  }
  if (st->st_uid != host.euid || (st->st_mode & 077) != 0) {
    return Make("daemon.socket", CheckStatus::kFail,
                absl::StrCat(f.socket_path, " is uid ", st->st_uid, " mode ", Mode(*st),
                             " (aboxd makes it 0600)"),
                "stop whatever created it and restart aboxd");
  }
  return Make("daemon.socket", CheckStatus::kPass,
              absl::StrCat(f.socket_path, ": yours, mode ", Mode(*st)));
}

Check RunningCheck(const DaemonFacts& f) {
  if (f.health) {
    return Make(
        "daemon.running", CheckStatus::kPass,
        absl::StrCat("aboxd answers (pid ", f.health->pid.value_or(0),
                     ", sandboxes running: ", f.health->sandboxes.value_or(0), ", accelerator ",
                     f.health->accel.empty() ? "not chosen yet" : f.health->accel, ")"));
  }
  if (f.not_running) {
    return Make("daemon.running", CheckStatus::kWarn,
                absl::StrCat("aboxd is not running on ", f.socket_path,
                             ": its sandboxes and listeners are not checked"),
                kStartDaemon);
  }
  return Make("daemon.running", CheckStatus::kFail,
              absl::StrCat("aboxd could not be asked: ", f.error.message()),
              "see the reason; `abox daemon status` says more");
}

Check StateFilesCheck(const HostView& host, const DaemonFacts& f) {
  std::vector<std::string> loose;
  std::vector<std::string> seen;
  for (const char* name : {"state.db", "state.db-wal", "state.db-shm", "tcp-token"}) {
    std::string path = absl::StrCat(f.home, "/", name);
    absl::StatusOr<struct stat> st = host.Lstat(path);
    if (!st.ok()) {
      continue;
    }
    seen.emplace_back(name);
    if (!OwnerOnly(*st, host.euid)) {
      loose.push_back(absl::StrCat(path, " (uid ", st->st_uid, ", mode ", Mode(*st), ")"));
    }
  }
  if (!loose.empty()) {
    return Make("daemon.state_files", CheckStatus::kFail,
                absl::StrCat("open to others: ", absl::StrJoin(loose, ", "),
                             " (commands' output and the TCP token are in them)"),
                absl::StrCat("chmod 600 ", f.home, "/state.db* ", f.home, "/tcp-token"));
  }
  if (seen.empty()) {
    return Make("daemon.state_files", CheckStatus::kInfo,
                absl::StrCat("no state in ", f.home, " yet"));
  }
  return Make("daemon.state_files", CheckStatus::kPass,
              absl::StrCat(absl::StrJoin(seen, ", "), ": yours, mode 0600 or tighter"));
}

Check HomeCheck(const HostView& host, const DaemonFacts& f) {
  absl::StatusOr<struct stat> st = host.Lstat(f.home);
  if (!st.ok()) {
    return Make("daemon.home", CheckStatus::kInfo, absl::StrCat(f.home, " does not exist yet"));
  }
  if (st->st_uid != host.euid || (st->st_mode & 022) != 0) {
    return Make("daemon.home", CheckStatus::kFail,
                absl::StrCat(f.home, " is uid ", st->st_uid, " mode ", Mode(*st),
                             ": others could replace images or sandbox files"),
                absl::StrCat("chmod go-w ", f.home, " (and chown it to yourself)"));
  }
  return Make("daemon.home", CheckStatus::kPass,
              absl::StrCat(f.home, ": yours, mode ", Mode(*st), ", writable by you only"));
}

// "0100007F:1F90" (IPv4, little-endian words) or 32 hex digits (IPv6) to text.
std::string TcpAddress(absl::string_view hex_address, bool v6) {
  std::vector<absl::string_view> parts = absl::StrSplit(hex_address, ':');
  if (parts.size() != 2) {
    return std::string(hex_address);
  }
  uint32_t port = 0;
  if (!absl::SimpleHexAtoi(parts[1], &port)) {
    return std::string(hex_address);
  }
  std::vector<uint8_t> bytes;
  for (size_t word = 0; word + 8 <= parts[0].size(); word += 8) {
    uint32_t w = 0;
    if (!absl::SimpleHexAtoi(parts[0].substr(word, 8), &w)) {
      return std::string(hex_address);
    }
    for (int i = 0; i < 4; ++i) {  // /proc prints each 32-bit word in host (little) endianness
      bytes.push_back(static_cast<uint8_t>(w >> (8 * i)));
    }
  }
  if (!v6 && bytes.size() == 4) {
    return absl::StrFormat("%d.%d.%d.%d:%d", bytes[0], bytes[1], bytes[2], bytes[3], port);
  }
  std::string text;
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
    absl::StrAppend(&text, i == 0 ? "" : ":", absl::Hex(bytes[i] << 8 | bytes[i + 1]));
  }
  return absl::StrCat("[", text, "]:", port);
}

bool IsLoopback(const std::string& address) {
  return absl::StartsWith(address, "127.") || absl::StartsWith(address, "[0:0:0:0:0:0:0:1]") ||
         absl::StartsWith(address, "[0:0:0:0:0:ffff:7f");
}

Check TcpCheck(const HostView& host, const DaemonFacts& f) {
  if (!f.health || !f.health->pid) {
    return Make("daemon.tcp", CheckStatus::kInfo, "not checked: aboxd is not running");
  }
  absl::StatusOr<std::vector<std::string>> listeners = TcpListeners(host, *f.health->pid);
  if (!listeners.ok()) {
    return Make("daemon.tcp", CheckStatus::kWarn,
                absl::StrCat("cannot read aboxd's sockets: ", listeners.status().message()));
  }
  if (listeners->empty()) {
    return Make("daemon.tcp", CheckStatus::kPass, "no TCP listener (unix socket only)");
  }
  std::vector<std::string> open;
  for (const std::string& l : *listeners) {
    if (!IsLoopback(l)) {
      open.push_back(l);
    }
  }
  std::string all = absl::StrJoin(*listeners, ", ");
  if (!open.empty()) {
    return Make("daemon.tcp", CheckStatus::kFail,
                absl::StrCat("aboxd listens beyond loopback: ", absl::StrJoin(open, ", ")),
                "restart aboxd; it binds 127.0.0.1 only, so this is not abox's listener");
  }
  return Make("daemon.tcp", CheckStatus::kPass,
              absl::StrCat("TCP on ", all,
                           " only, every request needs the bearer token (daemon.state_files "
                           "checks its file)"));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> TcpListeners(const HostView& host, int64_t pid) {
  std::string proc = absl::StrCat("/proc/", pid);
  ABOX_ASSIGN_OR_RETURN(std::vector<std::string> fds, host.List(proc + "/fd"));
  std::vector<std::string> inodes;
  for (const std::string& fd : fds) {
    absl::StatusOr<std::string> target = host.ReadLink(absl::StrCat(proc, "/fd/", fd));
    if (target.ok() && absl::StartsWith(*target, "socket:[")) {
      inodes.push_back(target->substr(8, target->size() - 9));
    }
  }
  std::vector<std::string> out;
  for (bool v6 : {false, true}) {
    absl::StatusOr<std::string> table = host.Read(proc + (v6 ? "/net/tcp6" : "/net/tcp"));
    if (!table.ok()) {
      continue;
    }
    // "sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ..."
    for (absl::string_view line : absl::StrSplit(*table, '\n', absl::SkipEmpty())) {
      std::vector<absl::string_view> cols =
          absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      if (cols.size() < 10 || cols[3] != "0A") {  // 0A: LISTEN
        continue;
      }
      if (std::find(inodes.begin(), inodes.end(), cols[9]) != inodes.end()) {
        out.push_back(TcpAddress(cols[1], v6));
      }
    }
  }
  return out;
}

namespace {

// A file only this user may read, in a folder only this user may enter: `absent` when there
// is none, `pass` when both are the user's alone, a failure saying what to run otherwise.
struct OwnerOnlyFile {
  std::string name;  // "secrets.store"
  std::string dir;
  std::string file;
  std::string absent;       // reason when the file does not exist
  std::string pass;         // appended to the pass reason
  std::string consequence;  // why a loose one matters
  std::string then;         // what to do after the chmod
};

Check OwnerOnlyFileCheck(const HostView& host, const OwnerOnlyFile& o) {
  auto check = [&o](CheckStatus status, std::string reason, std::string fix = "") {
    return Check{"secrets", o.name, status, std::move(reason), std::move(fix)};
  };
  absl::StatusOr<struct stat> d = host.Lstat(o.dir);
  absl::StatusOr<struct stat> f = host.Lstat(o.file);
  if (!f.ok()) {
    return check(CheckStatus::kInfo, o.absent);
  }
  if (!d.ok() || !S_ISDIR(d->st_mode) || !OwnerOnly(*d, host.euid) || !S_ISREG(f->st_mode) ||
      !OwnerOnly(*f, host.euid)) {
    return check(CheckStatus::kFail,
                 absl::StrCat(o.file, " (uid ", f->st_uid, ", mode ", Mode(*f),
                              ") or its folder is not yours alone: ", o.consequence),
                 absl::StrCat("chmod 700 ", o.dir, "; chmod 600 ", o.file, "; then ", o.then));
  }
  return check(CheckStatus::kPass, absl::StrCat(o.file, ": yours, mode ", Mode(*f), o.pass));
}

}  // namespace

Check SecretFileCheck(const HostView& host, const std::string& home) {
  const std::string dir = absl::StrCat(home, "/secrets");
  const std::string file = absl::StrCat(dir, "/values.json");
  return OwnerOnlyFileCheck(
      host, {.name = "secrets.store",
             .dir = dir,
             .file = file,
             .absent = absl::StrCat("no value file (", file,
                                    "): stored secrets' values are in the desktop keyring, or "
                                    "there are none (`abox secret ls`)"),
             .pass = " (no desktop keyring was found: the values are as safe as this account's "
                     "files)",
             .consequence = "aboxd refuses to use it, and others may have read the values",
             .then = "rotate the secrets in it (`abox secret ls`)"});
}

Check CaKeyCheck(const HostView& host, const std::string& home) {
  const std::string dir = absl::StrCat(home, "/ca");
  const std::string file = absl::StrCat(dir, "/ca.key");
  return OwnerOnlyFileCheck(
      host, {.name = "secrets.ca_key",
             .dir = dir,
             .file = file,
             .absent = "no interception CA yet: aboxd makes one when a sandbox is first given a "
                       "secret (abox create --secret)",
             .pass = " (the key of the CA that sandboxes given a secret trust; it never leaves "
                     "this host)",
             .consequence = "aboxd refuses to use it, and whoever read the key could forge "
                            "certificates those sandboxes trust",
             .then = "move the folder aside so aboxd makes a new CA (running sandboxes with "
                     "secrets must be re-created)"});
}

std::vector<Check> DaemonChecks(const HostView& host, const DaemonFacts& facts) {
  return {RunningCheck(facts),    SocketDirectoryCheck(host, facts), SocketCheck(host, facts),
          HomeCheck(host, facts), StateFilesCheck(host, facts),      TcpCheck(host, facts)};
}

}  // namespace abox::cli
