// The QEMU jail (src/vmm/jail.h, decision 0021) as the kernel shows it for two running
// sandboxes: every property read from /proc/<qemu pid>/ (not from the argument list), and from
// inside one QEMU's namespaces, with its uid, that it sees neither the other VM's files nor its
// processes, and cannot signal them even from the host's PID namespace.
#include "src/vmm/jail.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/cli_home_test.h"

namespace abox::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

struct Qemu {
  std::string id;
  std::string run_dir;
  pid_t pid = 0;
  std::string status;  // /proc/<pid>/status
  uid_t uid = 0;
  std::map<std::string, std::string> ns;  // kind -> /proc/<pid>/ns/<kind> link
};

std::string Field(const std::string& status, const std::string& key) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (absl::ConsumePrefix(&line, key + ":")) {
      return std::string(absl::StripAsciiWhitespace(line));
    }
  }
  return "";
}

constexpr const char* kNamespaces[] = {"mnt", "pid", "net", "ipc", "uts", "cgroup", "user"};

class JailE2eTest : public CliHomeTest {
 protected:
  Qemu Start(const std::string& name) {
    Qemu q;
    AboxResult created = Abox({"create", "--name", name});
    EXPECT_EQ(created.exit_code, 0) << created.err;
    q.id = std::string(absl::StripAsciiWhitespace(created.out));
    AboxResult inspect = Abox({"inspect", "--json", q.id});
    EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
    nlohmann::json j = nlohmann::json::parse(inspect.out, nullptr, false);
    q.pid = j.is_object() ? static_cast<pid_t>(j.value("vmm_pid", 0)) : 0;
    // The VM's run dir (<id>, or <id>.<n> after a restore) is where QEMU's overlay is open.
    std::error_code ec;
    for (const auto& e :
         std::filesystem::directory_iterator(absl::StrCat("/proc/", q.pid, "/fd"), ec)) {
      std::string target = std::filesystem::read_symlink(e.path(), ec).string();
      if (absl::EndsWith(target, "/overlay.qcow2")) {
        q.run_dir = std::filesystem::path(target).parent_path().string();
      }
    }
    EXPECT_THAT(q.run_dir, HasSubstr(q.id)) << "no overlay open in QEMU";
    absl::StatusOr<std::string> status = base::ReadFile(absl::StrCat("/proc/", q.pid, "/status"));
    EXPECT_TRUE(status.ok()) << status.status();
    q.status = status.ok() ? *status : "";
    EXPECT_THAT(Field(q.status, "Name"), HasSubstr("qemu")) << "vmm_pid is not QEMU";
    std::string uid = Field(q.status, "Uid");
    EXPECT_TRUE(absl::SimpleAtoi(uid.substr(0, uid.find('\t')), &q.uid)) << uid;
    for (const char* kind : kNamespaces) {
      q.ns[kind] =
          std::filesystem::read_symlink(absl::StrCat("/proc/", q.pid, "/ns/", kind), ec).string();
    }
    return q;
  }
};

TEST_F(JailE2eTest, EachQemuRunsInItsOwnJailAndCannotReachAnothersFilesOrProcesses) {
  const bool root = ::geteuid() == 0;
  Qemu a = Start("jail-a");
  Qemu b = Start("jail-b");
  ASSERT_GT(a.pid, 0);
  ASSERT_GT(b.pid, 0);
  ASSERT_FALSE(HasFailure());

  for (const Qemu* q : {&a, &b}) {
    SCOPED_TRACE(q->id);
    // Credentials: a uid of its own (root) or the caller's in a user namespace; nothing else.
    std::string u = std::to_string(q->uid);
    EXPECT_EQ(Field(q->status, "Uid"), absl::StrCat(u, "\t", u, "\t", u, "\t", u));
    if (root) {
      EXPECT_TRUE(vmm::IsVmUid(q->uid)) << q->status;
      EXPECT_EQ(Field(q->status, "Gid"), absl::StrCat(u, "\t", u, "\t", u, "\t", u));
      EXPECT_EQ(Field(q->status, "Groups"), "");
    } else {
      EXPECT_EQ(q->uid, ::geteuid());
    }
    for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
      EXPECT_EQ(Field(q->status, set), "0000000000000000") << set;
    }
    EXPECT_EQ(Field(q->status, "NoNewPrivs"), "1");
    EXPECT_EQ(Field(q->status, "Seccomp"), "2");
    // PID 1 of its own PID namespace.
    EXPECT_THAT(Field(q->status, "NSpid"), ::testing::MatchesRegex(absl::StrCat(q->pid, "\\s+1")));

    // Namespaces: none shared with the host (user only when not root) nor with the other VM.
    for (const char* kind : kNamespaces) {
      std::error_code ec;
      std::string host =
          std::filesystem::read_symlink(absl::StrCat("/proc/self/ns/", kind), ec).string();
      if (std::string(kind) == "user" && root) {
        continue;  // as root the per-VM uid stands in for a user namespace
      }
      EXPECT_NE(q->ns.at(kind), host) << kind << " namespace shared with the host";
    }

    // Its network namespace has loopback only.
    absl::StatusOr<std::string> net = base::ReadFile(absl::StrCat("/proc/", q->pid, "/net/dev"));
    ASSERT_TRUE(net.ok()) << net.status();
    std::vector<std::string> ifaces;
    for (absl::string_view line : absl::StrSplit(*net, '\n', absl::SkipEmpty())) {
      if (size_t colon = line.find(':'); colon != absl::string_view::npos) {
        ifaces.emplace_back(absl::StripAsciiWhitespace(line.substr(0, colon)));
      }
    }
    EXPECT_EQ(ifaces, std::vector<std::string>{"lo"}) << *net;

    // Its root: /usr and the links into it, three device nodes, its own /proc; nothing else.
    std::vector<std::string> root_entries;
    std::error_code ec;
    for (const auto& e :
         std::filesystem::directory_iterator(absl::StrCat("/proc/", q->pid, "/root"), ec)) {
      root_entries.push_back(e.path().filename().string());
    }
    EXPECT_FALSE(ec) << ec.message();
    for (const std::string& entry : root_entries) {
      EXPECT_THAT((std::vector<std::string>{"dev", "etc", "lib", "lib64", "proc", "usr"}),
                  Contains(entry))
          << "the jail's root holds " << entry;
    }
    EXPECT_THAT(root_entries, Contains("usr"));
    std::vector<std::string> devs;
    for (const auto& e :
         std::filesystem::directory_iterator(absl::StrCat("/proc/", q->pid, "/root/dev"), ec)) {
      devs.push_back(e.path().filename().string());
    }
    std::sort(devs.begin(), devs.end());
    EXPECT_EQ(devs, (std::vector<std::string>{"null", "urandom", "zero"}));

    // Limits.
    absl::StatusOr<std::string> limits = base::ReadFile(absl::StrCat("/proc/", q->pid, "/limits"));
    ASSERT_TRUE(limits.ok());
    EXPECT_THAT(*limits, ::testing::ContainsRegex("Max core file size +0 +0"));
    EXPECT_THAT(*limits, ::testing::ContainsRegex("Max open files +4096 +4096"));
    if (root) {
      EXPECT_THAT(*limits, ::testing::ContainsRegex("Max processes +256 +256"));
    }
  }
  // Never shared between the two VMs.
  if (root) {
    EXPECT_NE(a.uid, b.uid);
  }
  for (const char* kind : {"mnt", "pid", "net", "ipc", "uts"}) {
    EXPECT_NE(a.ns.at(kind), b.ns.at(kind)) << kind << " namespace shared between VMs";
  }

  // From inside QEMU a's namespaces and root, with its credentials (as a QEMU the guest took
  // over would be, minus seccomp): b's run dir, overlay, $ABOX_HOME and b's process are not
  // there; /proc lists only a's own namespace.
  std::string b_pid = std::to_string(b.pid);
  std::string probe = absl::StrCat(
      "echo procs: $(ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '); ", "test -e ", b.run_dir,
      "/overlay.qcow2 && echo SEES-B-OVERLAY; ", "test -e ", a.run_dir,
      " && echo SEES-OWN-RUN-DIR; ", "test -e ", AboxHome(), " && echo SEES-ABOX-HOME; ",
      "test -d /proc/", b_pid, " && grep -q qemu /proc/", b_pid, "/comm 2>/dev/null && ",
      "echo SEES-B-PROCESS; ", "kill -0 ", b_pid, " 2>/dev/null && grep -q qemu /proc/", b_pid,
      "/comm 2>/dev/null && echo SIGNALS-B; echo probed");
  std::vector<std::string> nsenter = {
      "nsenter", "-t", std::to_string(a.pid), "-m", "-p", "-n", "-i", "-u", "-C", "-r", "-w"};
  if (root) {
    for (const std::string& arg :
         {std::string("-S"), std::to_string(a.uid), std::string("-G"), std::to_string(a.uid)}) {
      nsenter.push_back(arg);
    }
  } else {
    nsenter.emplace_back("-U");
    nsenter.emplace_back("--preserve-credentials");
  }
  nsenter.insert(nsenter.end(), {"--", "/usr/bin/sh", "-c", probe});
  absl::StatusOr<base::CommandResult> inside = base::RunCommand(nsenter);
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_EQ(inside->status.ShellCode(), 0) << inside->err;
  EXPECT_THAT(inside->out, HasSubstr("probed"));  // the probe ran to its end
  EXPECT_THAT(inside->out, HasSubstr("procs: 1 ")) << "QEMU is PID 1 there";
  for (const char* leak :
       {"SEES-B-OVERLAY", "SEES-OWN-RUN-DIR", "SEES-ABOX-HOME", "SEES-B-PROCESS", "SIGNALS-B"}) {
    EXPECT_THAT(inside->out, Not(HasSubstr(leak))) << inside->out;
  }
  // Positive twin: the same probe run on the host (no namespaces) does see them, so the
  // checks above are not vacuous.
  absl::StatusOr<base::CommandResult> host = base::RunCommand({"/usr/bin/sh", "-c", probe});
  ASSERT_TRUE(host.ok());
  EXPECT_THAT(host->out, HasSubstr("SEES-B-OVERLAY"));
  EXPECT_THAT(host->out, HasSubstr("SEES-B-PROCESS"));

  if (root) {
    // Even in the host's PID namespace, a's uid may not signal b's QEMU (nor read its memory
    // maps): the uids differ.
    absl::StatusOr<base::CommandResult> kill = base::RunCommand(
        {"setpriv", absl::StrCat("--reuid=", a.uid), absl::StrCat("--regid=", a.uid),
         "--clear-groups", "--", "/usr/bin/sh", "-c",
         absl::StrCat("kill -0 ", b_pid, " && echo SIGNALLED; cat /proc/", b_pid,
                      "/maps >/dev/null 2>&1 && echo READ-MAPS; echo done")});
    ASSERT_TRUE(kill.ok());
    EXPECT_THAT(kill->out, HasSubstr("done"));
    EXPECT_THAT(kill->out, Not(HasSubstr("SIGNALLED")));
    EXPECT_THAT(kill->out, Not(HasSubstr("READ-MAPS")));
    EXPECT_THAT(kill->err, HasSubstr("Operation not permitted"));
  }
  // The VMs still work.
  for (const Qemu* q : {&a, &b}) {
    AboxResult r = Abox({"exec", q->id, "--", "echo", "alive"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("alive"));
  }
}

// Links (or, across file systems, copies) `from` to `to`.
void LinkOrCopy(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  std::filesystem::create_hard_link(from, to, ec);
  if (ec) {
    std::filesystem::copy_file(from, to, ec);
  }
  ASSERT_FALSE(ec) << from << " -> " << to << ": " << ec.message();
}

// The path abox takes for a user who is not root, a whole VM of it: `abox run --direct` run as
// uid 65534 (with the image and binaries linked where that uid can read them). QEMU is then
// uid 0 of a user namespace of its own that maps only 65534, with no capability, in its own
// namespaces and root.
TEST(JailUserE2eTest, ForAUserOtherThanRootQemuIsRootOfItsOwnUserNamespace) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to become another user; run as a user, every e2e test takes "
                    "this path";
  }
  constexpr uid_t kNobody = 65534;
  std::string top = absl::StrCat("/tmp/abox-e2e-nonroot-", ::getpid());
  std::filesystem::remove_all(top);
  std::filesystem::path bin = top + "/bin";
  std::filesystem::path home = top + "/home";
  std::filesystem::path image = home / "images" / "default";
  std::filesystem::create_directories(bin);
  std::filesystem::create_directories(image);
  std::filesystem::path built = std::filesystem::path(AboxBin()).parent_path();
  for (const char* name : {"abox", "abox-shim", "abox-jail", "abox-guest"}) {
    LinkOrCopy(built / name, bin / name);
  }
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator(SharedAboxHome() + "/images/default", ec)) {
    LinkOrCopy(e.path(), image / e.path().filename());
  }
  ASSERT_FALSE(ec) << ec.message();
  for (const std::filesystem::path& dir : {std::filesystem::path(top), bin}) {
    ::chmod(dir.c_str(), 0755);
  }
  for (const std::filesystem::path& dir : {home, home / "images", image}) {
    ASSERT_EQ(::chown(dir.c_str(), kNobody, kNobody), 0) << dir;
  }
  ASSERT_FALSE(HasFailure());

  absl::StatusOr<base::Pipe> out = base::MakePipe();
  ASSERT_TRUE(out.ok());
  base::SpawnOptions o;
  o.argv = {"setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            (bin / "abox").string(),
            "run",
            "--direct",
            "--no-stdin",
            "--",
            "sh",
            "-c",
            "echo ready; sleep 60"};
  o.env = std::vector<std::string>{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home.string(),
                                   "ABOX_HOME=" + home.string()};
  o.stdout_fd = out->write.get();
  o.close_other_fds = true;
  absl::StatusOr<base::ChildProcess> abox = base::ChildProcess::Spawn(o);
  ASSERT_TRUE(abox.ok()) << abox.status();
  out->write.reset();
  std::string seen;
  char buf[256];
  while (!absl::StrContains(seen, "ready")) {
    ssize_t n = ::read(out->read.get(), buf, sizeof(buf));
    if (n <= 0) {
      break;
    }
    seen.append(buf, static_cast<size_t>(n));
  }
  ASSERT_THAT(seen, HasSubstr("ready")) << "abox run as uid 65534 did not start its command";

  pid_t qemu = 0;
  for (pid_t shim : ChildrenOf(abox->pid())) {
    for (pid_t child : ChildrenOf(shim)) {
      qemu = child;
    }
  }
  ASSERT_GT(qemu, 0) << "no QEMU under abox's shim";
  absl::StatusOr<std::string> status = base::ReadFile(absl::StrCat("/proc/", qemu, "/status"));
  ASSERT_TRUE(status.ok());
  EXPECT_THAT(Field(*status, "Name"), HasSubstr("qemu"));
  // Outside: uid 65534 throughout; every capability set empty.
  EXPECT_EQ(Field(*status, "Uid"), "65534\t65534\t65534\t65534");
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_EQ(Field(*status, set), "0000000000000000") << set;
  }
  EXPECT_EQ(Field(*status, "NoNewPrivs"), "1");
  EXPECT_EQ(Field(*status, "Seccomp"), "2");
  // Its user namespace maps root to 65534 and nothing else.
  absl::StatusOr<std::string> uid_map = base::ReadFile(absl::StrCat("/proc/", qemu, "/uid_map"));
  ASSERT_TRUE(uid_map.ok());
  std::vector<std::string> fields = absl::StrSplit(*uid_map, ' ', absl::SkipWhitespace());
  EXPECT_EQ(fields, (std::vector<std::string>{"0", "65534", "1\n"})) << *uid_map;
  for (const char* kind : kNamespaces) {
    std::string theirs =
        std::filesystem::read_symlink(absl::StrCat("/proc/", qemu, "/ns/", kind), ec).string();
    std::string ours =
        std::filesystem::read_symlink(absl::StrCat("/proc/self/ns/", kind), ec).string();
    EXPECT_NE(theirs, ours) << kind << " namespace shared with the host";
  }
  std::vector<std::string> root_entries;
  for (const auto& e :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", qemu, "/root"), ec)) {
    root_entries.push_back(e.path().filename().string());
  }
  EXPECT_THAT(root_entries, Contains("usr"));
  EXPECT_THAT(root_entries, Not(Contains("home")));
  EXPECT_THAT(root_entries, Not(Contains("tmp")));

  ASSERT_TRUE(abox->Kill(SIGTERM).ok());
  absl::StatusOr<base::ExitStatus> ended = abox->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->ShellCode(), 128 + SIGTERM);
  EXPECT_TRUE(std::filesystem::is_empty(home / "sandboxes", ec)) << "a run dir was left";
  std::filesystem::remove_all(top);
}

}  // namespace
}  // namespace abox::testing
