// The jail QEMU runs in (jail.h), and the per-VM uid leases (vm_uid.h). The Spawn tests start
// abox-jail for real in new namespaces (root, or unprivileged user namespaces) around a shell
// instead of QEMU and read the jail back from inside and from /proc outside.
#include "src/vmm/jail.h"

#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "src/base/self_path.h"
#include "src/base/status_macros.h"
#include "src/vmm/qemu_launch.h"
#include "src/vmm/vm_uid.h"

namespace abox::vmm {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string TempDir(const std::string& name) {
  std::string dir = absl::StrCat(::testing::TempDir(), "/jail_test_", name, "_", ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(JailTest, ArgvRoundTrips) {
  JailOptions o;
  o.uid = 2047541249;
  o.gid = 2047541249;
  o.groups = {108, 109};
  o.new_root = "/run/x/vm";
  o.read_only = {"/usr", "/lib64"};
  o.devices = {"null", "kvm"};
  o.max_files = 4096;
  o.max_processes = 256;
  o.hostname = "abox-qemu";
  std::vector<std::string> argv = JailArgv("/opt/abox-jail", o);
  EXPECT_EQ(argv.front(), "/opt/abox-jail");
  EXPECT_EQ(argv.back(), "--");
  argv.push_back("/usr/bin/qemu-system-x86_64");
  size_t command = 0;
  absl::StatusOr<JailOptions> back =
      ParseJailArgv(std::vector<std::string>(argv.begin() + 1, argv.end()), &command);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(command, argv.size() - 2);
  EXPECT_EQ(back->uid, o.uid);
  EXPECT_EQ(back->gid, o.gid);
  EXPECT_THAT(back->groups, ElementsAre(108u, 109u));
  EXPECT_FALSE(back->user_namespace);
  EXPECT_EQ(back->new_root, o.new_root);
  EXPECT_EQ(back->read_only, o.read_only);
  EXPECT_EQ(back->devices, o.devices);
  EXPECT_EQ(back->max_files, 4096u);
  EXPECT_EQ(back->max_processes, 256u);
  EXPECT_EQ(back->hostname, "abox-qemu");
}

TEST(JailTest, ParseRefusesWhatItDoesNotKnow) {
  size_t command = 0;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--uid=abc", "--", "q"},
                                             {"--groups=1,x", "--", "q"},
                                             {"--frobnicate=1", "--", "q"},
                                             {"--userns"},
                                             {"--uid=1", "--"},
                                             {"stray", "--", "q"}}) {
    EXPECT_FALSE(ParseJailArgv(args, &command).ok()) << absl::StrJoin(args, " ");
  }
}

TEST(JailTest, EnterRefusesPathsOutsideWhatItBinds) {
  JailOptions o;
  o.read_only = {"usr"};
  EXPECT_THAT(std::string(EnterJail(o).message()), HasSubstr("absolute"));
  o.read_only = {"/usr/../etc"};
  EXPECT_THAT(std::string(EnterJail(o).message()), HasSubstr("absolute"));
  o.read_only = {};
  o.devices = {"../sda"};
  EXPECT_THAT(std::string(EnterJail(o).message()), HasSubstr("under /dev"));
  o.devices = {};
  o.user_namespace = true;
  o.uid = 5;
  EXPECT_THAT(std::string(EnterJail(o).message()), HasSubstr("exclude"));
}

ShimConfig Config(const std::string& run_dir, Accel accel) {
  ShimConfig c;
  c.run_dir = run_dir;
  c.qemu_binary = "/usr/bin/qemu-system-x86_64";
  c.accel = accel;
  return c;
}

TEST(JailTest, OptionsForAVmAsRootAndNot) {
  ShimConfig c = Config("/run/x/vm", Accel::kTcg);
  c.drop = PrivilegeDrop{.uid = kVmUidBase + 7, .gid = kVmUidBase + 7, .groups = {}};
  JailOptions root = JailOptionsFor(c, /*namespaces=*/true);
  EXPECT_EQ(root.uid, kVmUidBase + 7);
  EXPECT_FALSE(root.user_namespace);
  EXPECT_EQ(root.max_processes, 256u);
  EXPECT_EQ(root.new_root, "/run/x/vm");
  EXPECT_THAT(root.read_only, Contains("/usr"));
  EXPECT_THAT(root.devices, ElementsAre("null", "zero", "urandom"));
  EXPECT_EQ(root.hostname, "abox-qemu");

  c.accel = Accel::kKvm;
  EXPECT_THAT(JailOptionsFor(c, true).devices, Contains("kvm"));

  c.drop.reset();
  JailOptions user = JailOptionsFor(c, true);
  EXPECT_TRUE(user.user_namespace);
  EXPECT_FALSE(user.uid.has_value());
  EXPECT_EQ(user.max_processes, 0u) << "the caller's own uid: a process limit would count theirs";

  JailOptions bare = JailOptionsFor(c, /*namespaces=*/false);
  EXPECT_TRUE(bare.new_root.empty());
  EXPECT_FALSE(bare.user_namespace);
  EXPECT_TRUE(bare.devices.empty());
  EXPECT_EQ(bare.max_files, 4096u);
}

TEST(VmUidTest, LeasesAreExclusiveInTheRangeAndGivenBackOnClose) {
  std::string dir = TempDir("uids");
  absl::StatusOr<VmUidLease> a = LeaseVmUid(dir, "vm-a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(IsVmUid(a->uid));
  // The same seed starts at the same slot, finds it taken and takes the next.
  absl::StatusOr<VmUidLease> b = LeaseVmUid(dir, "vm-a");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(a->uid, b->uid);
  EXPECT_TRUE(IsVmUid(b->uid));
  uid_t first = a->uid;
  a->lock.reset();
  absl::StatusOr<VmUidLease> c = LeaseVmUid(dir, "vm-a");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->uid, first) << "a lease given back is free again";
  std::filesystem::remove_all(dir);
}

struct JailRun {
  std::string out;
  base::ExitStatus status;
  pid_t pid = 0;
  std::vector<std::string> host_ns_differs;  // namespaces whose /proc/<pid>/ns link is not ours
};

// Runs `script` with /usr/bin/sh in abox-jail cloned into the namespaces a VM gets, as a VM's
// jail would (JailOptionsFor), and reads its namespaces from the host's /proc while it runs.
absl::StatusOr<JailRun> RunInJail(const std::string& jail, const std::string& run_dir,
                                  const std::string& script, std::optional<uid_t> uid) {
  ShimConfig c = Config(run_dir, Accel::kTcg);
  if (uid) {
    c.drop = PrivilegeDrop{.uid = *uid, .gid = *uid, .groups = {}};
  }
  JailOptions o = JailOptionsFor(c, true);
  ABOX_ASSIGN_OR_RETURN(base::Pipe out, base::MakePipe());
  base::SpawnOptions so;
  so.argv = JailArgv(jail, o);
  // The script waits for the host to read its namespaces: "go" on stdin.
  for (const char* a : {"/usr/bin/sh", "-c"}) {
    so.argv.emplace_back(a);
  }
  so.argv.push_back(absl::StrCat("read go; ", script));
  ABOX_ASSIGN_OR_RETURN(base::Pipe in, base::MakePipe());
  so.stdin_fd = in.read.get();
  so.stdout_fd = out.write.get();
  so.stderr_fd = out.write.get();
  so.env = VmmChildEnvironment();
  so.close_other_fds = true;
  so.namespaces = JailNamespaces(::geteuid() == 0);
  ABOX_ASSIGN_OR_RETURN(base::ChildProcess child, base::ChildProcess::Spawn(so));
  in.read.reset();
  out.write.reset();
  JailRun run;
  run.pid = child.pid();
  // Wait until abox-jail has exec'd the shell (its comm is "sh") before reading its namespaces.
  for (int i = 0; i < 500; ++i) {
    absl::StatusOr<std::string> comm = base::ReadFile(absl::StrCat("/proc/", run.pid, "/comm"));
    if (comm.ok() && absl::StartsWith(*comm, "sh")) {
      break;
    }
    ::usleep(10000);
  }
  for (const char* ns : {"mnt", "pid", "ipc", "uts", "net", "cgroup", "user"}) {
    std::error_code e1;
    std::error_code e2;
    auto theirs = std::filesystem::read_symlink(absl::StrCat("/proc/", run.pid, "/ns/", ns), e1);
    auto ours = std::filesystem::read_symlink(absl::StrCat("/proc/self/ns/", ns), e2);
    if (!e1 && !e2 && theirs != ours) {
      run.host_ns_differs.emplace_back(ns);
    }
  }
  ::signal(SIGPIPE, SIG_IGN);  // a jail that failed has closed its stdin: its output says why
  (void)base::WriteAll(in.write.get(), "go\n");
  in.write.reset();
  ABOX_ASSIGN_OR_RETURN(run.out, base::ReadAllFd(out.read.get(), 1 << 20));
  ABOX_ASSIGN_OR_RETURN(run.status, child.Wait(std::chrono::seconds(30)));
  return run;
}

// Whether the clone into new namespaces itself was refused (a host without unprivileged user
// namespaces): then there is nothing to test here. A failure after it is a failure.
bool RefusedByHost(absl::string_view error) {
  return absl::StrContains(error, "clone(new namespaces)") &&
         !absl::StrContains(error, "writing the user namespace's maps");
}

// What the jailed shell reports of itself: pid, hostname, root and /dev listings, credentials,
// limits, network devices, and any path of the host it should not see or write.
std::string Probe(const std::string& run_dir) {
  return "echo pid=$$; echo host=$(cat /proc/sys/kernel/hostname); echo root: $(ls -A /); "
         "echo dev: $(ls -A /dev); echo procs: $(ls /proc | grep -c '^[0-9]'); "
         "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' "
         "/proc/self/status; grep -E '^Max (core file size|open files|processes)' "
         "/proc/self/limits; echo net: $(tail -n +3 /proc/net/dev | cut -d: -f1); "
         "touch /x 2>/dev/null && echo ROOT-WRITABLE; touch /usr/x 2>/dev/null && echo "
         "USR-WRITABLE; "
         "test -e " +
         run_dir +
         "/overlay.qcow2 && echo RUN-DIR-VISIBLE; "
         "test -e /home && echo HOME-VISIBLE; test -e /etc/passwd && echo ETC-VISIBLE; echo end";
}

// What every jail must show from inside (`run` of Probe) and from the host: with `uid` a per-VM
// uid switched to; without, root of a user namespace of its own.
void ExpectJailed(const JailRun& run, std::optional<uid_t> uid) {
  const std::string& out = run.out;
  ASSERT_EQ(run.status.ShellCode(), 0) << out;
  EXPECT_THAT(out, HasSubstr("pid=1\n"));
  EXPECT_THAT(out, HasSubstr("host=abox-qemu\n"));
  std::vector<std::string> expected_root = {"dev", "etc", "lib", "lib64", "proc", "usr"};
  std::string root_line;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StartsWith(line, "root: ")) {
      root_line = std::string(line.substr(6));
    }
  }
  for (absl::string_view entry : absl::StrSplit(root_line, ' ')) {
    EXPECT_THAT(expected_root, Contains(std::string(entry))) << "unexpected in the jail's root";
  }
  EXPECT_THAT(out, HasSubstr("dev: null urandom zero\n"));
  EXPECT_THAT(out, HasSubstr("procs: ")) << out;
  EXPECT_THAT(out, Not(HasSubstr("procs: 0")));
  // Every set empty; no_new_privs; the limits.
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_THAT(out, HasSubstr(absl::StrCat(set, ":\t0000000000000000"))) << out;
  }
  EXPECT_THAT(out, HasSubstr("NoNewPrivs:\t1"));
  EXPECT_THAT(out, testing::ContainsRegex("Max core file size +0 +0"));
  EXPECT_THAT(out, testing::ContainsRegex("Max open files +4096 +4096"));
  if (uid) {
    std::string u = absl::StrCat(*uid);
    EXPECT_THAT(out, HasSubstr(absl::StrCat("Uid:\t", u, "\t", u, "\t", u, "\t", u)));
    EXPECT_THAT(out, HasSubstr(absl::StrCat("Gid:\t", u, "\t", u, "\t", u, "\t", u)));
    EXPECT_THAT(out, testing::ContainsRegex("Max processes +256 +256"));
  } else {
    // Root of its user namespace, which maps only the caller's uid: no capability (above).
    EXPECT_THAT(out, HasSubstr("Uid:\t0\t0\t0\t0"));
  }
  // Its own network namespace: loopback only.
  EXPECT_THAT(out, testing::ContainsRegex("net: +lo\n"));
  for (const char* leak :
       {"ROOT-WRITABLE", "USR-WRITABLE", "RUN-DIR-VISIBLE", "HOME-VISIBLE", "ETC-VISIBLE"}) {
    EXPECT_THAT(out, Not(HasSubstr(leak)));
  }
  EXPECT_THAT(out, HasSubstr("end\n"));
  std::vector<std::string> want = {"mnt", "pid", "ipc", "uts", "net", "cgroup"};
  if (!uid) {
    want.emplace_back("user");
  }
  for (const std::string& ns : want) {
    EXPECT_THAT(run.host_ns_differs, Contains(ns)) << "QEMU would share the host's " << ns;
  }
}

TEST(JailTest, AJailedProcessIsPidOneOfItsOwnNamespacesInAReadOnlyMinimalRoot) {
  std::string run_dir = TempDir("root");
  // A file of the run_dir (where the host keeps the VM's overlay and sockets) must not show.
  ASSERT_TRUE(base::WriteFileAtomic(run_dir + "/overlay.qcow2", "secret-ish").ok());
  const bool root = ::geteuid() == 0;
  std::optional<VmUidLease> lease;
  if (root) {
    absl::StatusOr<VmUidLease> l = LeaseVmUid(TempDir("root_uids"), "jail-test");
    ASSERT_TRUE(l.ok()) << l.status();
    lease = *std::move(l);
  }
  absl::StatusOr<std::string> jail = base::FindCompanionBinary("abox-jail", "ABOX_JAIL_BINARY");
  ASSERT_TRUE(jail.ok()) << jail.status();
  absl::StatusOr<JailRun> run = RunInJail(*jail, run_dir, Probe(run_dir),
                                          lease ? std::optional<uid_t>(lease->uid) : std::nullopt);
  // Root may always clone namespaces on a Linux host (outside a container that forbids them), so
  // only an unprivileged run may skip, on a host without unprivileged user namespaces.
  if (!run.ok() && !root && RefusedByHost(run.status().message())) {
    GTEST_SKIP() << "this host refuses the namespaces: " << run.status();
  }
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectJailed(*run, lease ? std::optional<uid_t>(lease->uid) : std::nullopt);
  // The mount namespace was its own: the host still sees the run_dir as it was.
  EXPECT_TRUE(std::filesystem::exists(run_dir + "/overlay.qcow2"));
  std::filesystem::remove_all(run_dir);
}

// The path a user who is not root takes (a user namespace whose root maps their uid), entered
// from this root test process: a forked child drops to uid 65534 first. (Where the tests run
// unprivileged, the test above takes that path itself.)
TEST(JailTest, WithoutRootTheJailIsAUserNamespaceWhoseRootHasNoCapabilities) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "not root: AJailedProcessIsPidOneOfItsOwnNamespacesInAReadOnlyMinimalRoot "
                    "took the user-namespace path";
  }
  constexpr uid_t kNobody = 65534;
  std::string run_dir = TempDir("userns");
  ASSERT_TRUE(base::WriteFileAtomic(run_dir + "/overlay.qcow2", "secret-ish").ok());
  // abox-jail where uid 65534 can run it (the build tree may be under a 0700 home).
  absl::StatusOr<std::string> built = base::FindCompanionBinary("abox-jail", "ABOX_JAIL_BINARY");
  ASSERT_TRUE(built.ok()) << built.status();
  std::string bin_dir = TempDir("userns_bin");
  std::string jail = bin_dir + "/abox-jail";
  std::filesystem::copy_file(*built, jail);
  ::chmod(jail.c_str(), 0755);
  ::chmod(bin_dir.c_str(), 0755);
  ASSERT_EQ(::chown(run_dir.c_str(), kNobody, kNobody), 0);
  absl::StatusOr<base::Pipe> report = base::MakePipe();
  ASSERT_TRUE(report.ok());
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    report->read.reset();
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0) {
      ::_exit(3);
    }
    // The uid change made this process non-dumpable (its /proc files root's); a user's process,
    // exec'd as that user, is dumpable.
    ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    absl::StatusOr<JailRun> run = RunInJail(jail, run_dir, Probe(run_dir), std::nullopt);
    std::string text = run.ok()
                           ? absl::StrCat("ok\n", run->status.ShellCode(), "\n",
                                          absl::StrJoin(run->host_ns_differs, ","), "\n", run->out)
                           : absl::StrCat("error\n", run.status().ToString());
    (void)base::WriteAll(report->write.get(), text);
    ::_exit(0);
  }
  report->write.reset();
  absl::StatusOr<std::string> text = base::ReadAllFd(report->read.get(), 1 << 20);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << wstatus;
  ASSERT_TRUE(text.ok());
  std::vector<std::string> parts = absl::StrSplit(*text, absl::MaxSplits('\n', 3));
  ASSERT_GE(parts.size(), 2u) << *text;
  if (parts[0] == "error" && RefusedByHost(parts[1])) {
    GTEST_SKIP() << "this host refuses unprivileged user namespaces: " << parts[1];
  }
  ASSERT_EQ(parts[0], "ok") << *text;
  ASSERT_EQ(parts.size(), 4u) << *text;
  JailRun run;
  run.out = parts[3];
  int code = -1;
  ASSERT_TRUE(absl::SimpleAtoi(parts[1], &code));
  run.status.exit_code = code;
  run.host_ns_differs = absl::StrSplit(parts[2], ',', absl::SkipEmpty());
  ExpectJailed(run, std::nullopt);
  std::filesystem::remove_all(run_dir);
  std::filesystem::remove_all(bin_dir);
}

}  // namespace
}  // namespace abox::vmm
