// Canary suite (issue 17), real VMs: secrets planted on the host (a fake ~/.ssh/id_ed25519 and
// ~/.aws/credentials, a file beside the workspace, a docker-like unix socket, a loopback TCP
// port) stay out of reach of guest root by every path we know (filesystem, network through the
// egress proxy and its transparent redirect, the workspace sync), and a guest that wipes itself
// as root (`rm -rf /`, zeros over every block device) leaves the host, the golden image and
// another sandbox unchanged. Every negative check has a positive twin, so it cannot pass by
// probing nothing: the same grep finds a token planted in the workspace, the listeners record
// a connection the test makes from the host, the proxy answers the guest with its refusal.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/base/unique_fd.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"

namespace abox::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::string RandomHex() {
  std::random_device rd;
  return absl::StrCat(absl::Hex(rd(), absl::kZeroPad8), absl::Hex(rd(), absl::kZeroPad8));
}

// Listens on a unix socket and on 127.0.0.1:<ephemeral> and counts every connection accepted,
// from a thread, until destroyed.
class CanaryListeners final {
 public:
  explicit CanaryListeners(const std::string& unix_path) : unix_path_(unix_path) {
    unix_fd_ = base::UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    unix_path.copy(un.sun_path, sizeof(un.sun_path) - 1);
    EXPECT_EQ(::bind(unix_fd_.get(), reinterpret_cast<sockaddr*>(&un), sizeof(un)), 0) << errno;
    EXPECT_EQ(::listen(unix_fd_.get(), 16), 0);
    tcp_fd_ = base::UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(in);
    EXPECT_EQ(::bind(tcp_fd_.get(), reinterpret_cast<sockaddr*>(&in), sizeof(in)), 0) << errno;
    EXPECT_EQ(::listen(tcp_fd_.get(), 16), 0);
    ::getsockname(tcp_fd_.get(), reinterpret_cast<sockaddr*>(&in), &len);
    tcp_port_ = ntohs(in.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CanaryListeners() {
    stop_ = true;
    thread_.join();
  }
  CanaryListeners(const CanaryListeners&) = delete;
  CanaryListeners& operator=(const CanaryListeners&) = delete;

  [[nodiscard]] int TcpPort() const { return tcp_port_; }
  [[nodiscard]] int Connections() const { return connections_; }

  // Connects from the host to both listeners (the positive control): true if both counted.
  bool ProbeFromHost() {
    int before = connections_;
    base::UniqueFd u(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    unix_path_.copy(un.sun_path, sizeof(un.sun_path) - 1);
    bool ok = ::connect(u.get(), reinterpret_cast<sockaddr*>(&un), sizeof(un)) == 0;
    base::UniqueFd t(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    in.sin_port = htons(static_cast<uint16_t>(tcp_port_));
    ok = ok && ::connect(t.get(), reinterpret_cast<sockaddr*>(&in), sizeof(in)) == 0;
    for (int i = 0; i < 50 && connections_ < before + 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return ok && connections_ == before + 2;
  }

 private:
  void Serve() {
    while (!stop_) {
      for (int fd : {unix_fd_.get(), tcp_fd_.get()}) {
        int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          ++connections_;
          ::close(c);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::string unix_path_;
  base::UniqueFd unix_fd_;
  base::UniqueFd tcp_fd_;
  int tcp_port_ = 0;
  std::atomic<int> connections_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Every entry under `root`, with its kind, mode and contents (symlinks as their target): two
// equal snapshots mean nothing there changed.
std::map<std::string, std::string> Snapshot(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    std::string rel = fs::relative(it->path(), root).string();
    auto mode = static_cast<int>(it->symlink_status().permissions()) & 07777;
    if (it->is_symlink()) {
      out[rel] = "link:" + fs::read_symlink(it->path()).string();
    } else if (it->is_regular_file()) {
      auto data = base::ReadFile(it->path().string(), 1 << 20);
      out[rel] = absl::StrCat(mode, ":", data.ok() ? *data : "unreadable");
    } else {
      out[rel] = absl::StrCat(mode, ":", static_cast<int>(it->status().type()));
    }
  }
  return out;
}

// Sizes and modification times of the golden image's files (`abox image verify` hashes them).
std::map<std::string, std::string> ImageStat(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      out[e.path().string()] =
          absl::StrCat(st.st_size, "@", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
    }
  }
  return out;
}

// The lines of `out` from the "== name" header to the next "== " header.
std::string Section(const std::string& out, const std::string& name) {
  size_t start = out.find("== " + name + "\n");
  if (start == std::string::npos) {
    ADD_FAILURE() << "no section " << name << " in:\n" << out;
    return "";
  }
  start += name.size() + 4;
  return out.substr(start, out.find("\n== ", start - 1) - start + 1);
}

class CanaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_ = "abox-canary-" + RandomHex();
    inside_ = "abox-inside-" + RandomHex();
    user_ = fs::path(home_.path()) / "user";
    WriteFile(user_ / ".ssh/id_ed25519",
              absl::StrCat("-----BEGIN OPENSSH PRIVATE KEY-----\n", secret_, "\n"));
    WriteFile(user_ / ".aws/credentials",
              absl::StrCat("[default]\naws_secret_access_key = ", secret_, "\n"));
    WriteFile(user_ / "outside.txt", secret_ + "\n");  // beside the workspace, not in it
    workspace_ = user_ / "project";
    // The innocent workspace: a file with the positive-control token, and links that point
    // out of it (to the file beside it and to the key): the sync copies links, never targets.
    WriteFile(workspace_ / "README.md", absl::StrCat("# demo ", inside_, "\n"));
    fs::create_symlink("../outside.txt", workspace_ / "beside");
    fs::create_symlink(user_ / ".ssh/id_ed25519", workspace_ / "key");
    fs::create_directories(user_ / ".docker/run");
    socket_path_ = (user_ / ".docker/run/docker.sock").string();
    listeners_ = std::make_unique<CanaryListeners>(socket_path_);
    ASSERT_TRUE(listeners_->ProbeFromHost()) << "the canary listeners do not record connections";
    baseline_connections_ = listeners_->Connections();
    before_ = Snapshot(user_);
  }

  void TearDown() override {
    RemoveAllSandboxes([this](std::vector<std::string> args) { return Abox(std::move(args)); });
    Abox({"daemon", "stop"});
  }

  static void WriteFile(const fs::path& p, const std::string& data) {
    fs::create_directories(p.parent_path());
    ASSERT_TRUE(base::WriteFileAtomic(p.string(), data, 0600).ok()) << p;
  }

  // abox (and the aboxd it starts) with the planted directory as the user's HOME.
  AboxResult Abox(std::vector<std::string> args) {
    AboxCall call;
    call.args = std::move(args);
    call.env = home_.Env();
    call.env["HOME"] = user_.string();
    call.timeout_seconds = 300;
    return RunAbox(call);
  }

  std::string Create() {
    AboxResult created = Abox({"create", "-w", workspace_.string()});
    EXPECT_EQ(created.exit_code, 0) << created.err;
    return std::string(absl::StripAsciiWhitespace(created.out));
  }

  // The host side after the guest did its worst: no connection, every planted file unchanged.
  void ExpectHostUntouched() {
    EXPECT_EQ(listeners_->Connections(), baseline_connections_)
        << "a guest connection reached a host listener";
    EXPECT_EQ(Snapshot(user_), before_) << "a planted file or the workspace changed";
  }

  DaemonHome home_;
  std::string secret_;  // in every planted secret, never legitimately in the guest
  std::string inside_;  // in the workspace: the grep's positive control
  fs::path user_;
  fs::path workspace_;
  std::string socket_path_;
  std::unique_ptr<CanaryListeners> listeners_;
  int baseline_connections_ = 0;
  std::map<std::string, std::string> before_;
};

TEST_F(CanaryTest, HostSecretsAreUnreachableFromGuestRoot) {
  std::string id = Create();
  ASSERT_EQ(id.size(), 12u);
  int port = listeners_->TcpPort();
  // The tokens go in split, so the command line (which the guest may log) never holds them.
  size_t half = secret_.size() / 2;
  std::string script = absl::StrReplaceAll(
      R"SH(S="@S1@"; S="${S}@S2@"; I="@I1@"; I="${I}@I2@"
echo "== grep"
timeout 120 grep -rIoF -e "$S" -e "$I" /workspace /root /home /tmp /mnt /media /run /etc /var /opt /srv /usr/local 2>/dev/null
echo "== grep-all"
timeout 240 grep -rIlF -e "$S" -e "$I" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null
echo "== links"
ls -l /workspace; cat /workspace/beside /workspace/key 2>&1
echo "== files"
ls -la "@HOME@" 2>&1; find / -xdev \( -name id_ed25519 -o -name credentials -o -name docker.sock -o -name outside.txt \) 2>/dev/null
echo "== mounts"
cat /proc/mounts
echo "== unix"
curl -sS --max-time 5 --unix-socket "@SOCK@" http://docker/version 2>&1; echo "rc=$?"
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "@SOCK@" 2>&1 | tail -1
echo "== net"
ip -o addr; ip route 2>&1
for h in 127.0.0.1 10.0.2.2 10.0.2.3 192.168.0.1 172.17.0.1 169.254.169.254; do
  timeout 5 bash -c "echo x > /dev/tcp/$h/@PORT@" 2>/dev/null; echo "tcp $h: rc=$?"
done
echo "== proxy"
for u in http://127.0.0.1:@PORT@/ http://localhost:@PORT@/ "http://[::1]:@PORT@/" http://10.0.2.2:@PORT@/; do
  echo "-- $u"; curl -sS --max-time 10 --proxy http://127.0.0.1:3128 --noproxy '' "$u" 2>&1 | head -c 300; echo " rc=${PIPESTATUS[0]}"
  echo "-- CONNECT $u"; curl -sS --max-time 10 -p --proxy http://127.0.0.1:3128 --noproxy '' "$u" 2>&1 | head -c 300; echo " rc=${PIPESTATUS[0]}"
done
echo "== end"
)SH",
      {{"@S1@", secret_.substr(0, half)},
       {"@S2@", secret_.substr(half)},
       {"@I1@", inside_.substr(0, half)},
       {"@I2@", inside_.substr(half)},
       {"@HOME@", user_.string()},
       {"@SOCK@", socket_path_},
       {"@PORT@", std::to_string(port)}});
  AboxResult probe = Abox({"exec", "--root", id, "--", "bash", "-c", script});
  std::cout << "guest probe output:\n" << probe.out << "\n[stderr]\n" << probe.err << "\n";
  ASSERT_THAT(probe.out, HasSubstr("== end")) << probe.err;

  // The grep is not vacuous: it finds the token that was synced into the workspace.
  EXPECT_THAT(probe.out, HasSubstr(absl::StrCat("/workspace/README.md:", inside_)));
  // Nothing the guest could print holds the secret; nothing of the user's home is there.
  EXPECT_THAT(probe.out, Not(HasSubstr(secret_)));
  EXPECT_THAT(probe.err, Not(HasSubstr(secret_)));
  // The same over the whole file system: the workspace file, and no other.
  EXPECT_EQ(Section(probe.out, "grep-all"), "/workspace/README.md\n");
  std::string files = Section(probe.out, "files");
  EXPECT_THAT(files, Not(HasSubstr("id_ed25519\n")));
  EXPECT_THAT(files, Not(HasSubstr("docker.sock\n")));
  EXPECT_THAT(files, Not(HasSubstr("outside.txt\n")));
  // No host path is mounted in.
  std::string mounts = Section(probe.out, "mounts");
  EXPECT_THAT(mounts, Not(HasSubstr(user_.string())));
  EXPECT_THAT(mounts, Not(HasSubstr(" 9p ")));
  EXPECT_THAT(mounts, Not(HasSubstr("virtiofs")));
  // The egress proxy was reached (by name and by address, plain and CONNECT) and refused.
  std::string proxy = Section(probe.out, "proxy");
  for (const std::string host : {"127.0.0.1", "localhost", "[::1]", "10.0.2.2"}) {
    EXPECT_THAT(proxy, HasSubstr(absl::StrCat("may not connect to ", host, ":", port, ".")));
  }
  EXPECT_THAT(proxy, HasSubstr("CONNECT tunnel failed, response 403"));
  // The socket path does not exist in the guest; nothing answered there.
  EXPECT_THAT(Section(probe.out, "unix"), HasSubstr("No such file or directory"));
  ExpectHostUntouched();
}

// Wipes the guest as root. dd, its libraries and the block devices' nodes go first to a tmpfs
// made read-only, so the wipe outlives `rm -rf /`.
constexpr char kWipe[] = R"SH(T=/toolbox; mkdir $T && mount -t tmpfs tb $T || exit 99
cp -a /dev/zero /dev/vd* /dev/sd* /dev/nvme* /dev/xvd* $T/ 2>/dev/null
cp /usr/bin/dd $(ldd /usr/bin/dd | grep -o '/[^ ]*') $T/ && mount -o remount,ro $T || exit 98
rm -rf --no-preserve-root / 2>/dev/null; echo "rm rc=$?"
[ -e /usr/bin/dd ] || echo "/usr is gone"
for d in $T/*; do
  [ -b "$d" ] || continue
  $T/ld-linux-x86-64.so.2 --library-path $T $T/dd if=$T/zero of="$d" bs=1M count=8 conv=fsync 2>/dev/null
  echo "wrote $d: rc=$?"
done)SH";

TEST_F(CanaryTest, DestructiveGuestRootLeavesHostImageAndOtherSandboxesUnchanged) {
  fs::path image = fs::path(SharedAboxHome()) / "images/default";
  std::map<std::string, std::string> image_before = ImageStat(image);
  ASSERT_FALSE(image_before.empty()) << image;

  // A bystander sandbox, running before and after; it keeps a file in its own disk.
  std::string bystander = Create();
  ASSERT_EQ(bystander.size(), 12u);
  AboxResult marked = Abox({"exec", bystander, "--", "sh", "-c", "echo alive > ~/marker; sync"});
  ASSERT_EQ(marked.exit_code, 0) << marked.err;

  // The destroyer: its own VM, root, the same workspace. The VM may die; its outcome is not
  // asserted, only that it did the damage.
  AboxCall destroy;
  destroy.args = {"run",  "--root", "-w", workspace_.string(), "--timeout", "120", "--",
                  "bash", "-c",     kWipe};
  AboxResult destroyed = RunAbox(destroy);
  std::cout << "destroyer: exit " << destroyed.exit_code << "\n"
            << destroyed.out << "\n[stderr]\n"
            << destroyed.err << "\n";
  EXPECT_THAT(destroyed.out, HasSubstr("/usr is gone")) << destroyed.err;
  EXPECT_THAT(destroyed.out, HasSubstr("wrote /toolbox/vda: rc=0")) << destroyed.err;

  // The host: planted files and workspace, the listeners, the golden image.
  ExpectHostUntouched();
  EXPECT_EQ(ImageStat(image), image_before);
  AboxResult verify = Abox({"image", "verify", "default"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;

  // The bystander still works and still reads its files from its disk (caches dropped, so a
  // disk shared with the destroyer would show).
  std::string reread =
      "sync; echo 3 > /proc/sys/vm/drop_caches; cat /home/*/marker; . /etc/os-release; echo $ID; "
      "ls /usr/bin | wc -l";
  AboxResult after = Abox({"exec", "--root", bystander, "--", "sh", "-c", reread});
  std::cout << "bystander after: " << after.out << after.err << "\n";
  EXPECT_EQ(after.exit_code, 0) << after.err;
  std::vector<std::string> lines = absl::StrSplit(after.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << after.out;
  EXPECT_EQ(lines[0], "alive");
  EXPECT_EQ(lines[1], "debian");
  int binaries = 0;
  EXPECT_TRUE(absl::SimpleAtoi(lines[2], &binaries));
  EXPECT_GT(binaries, 100);
}

}  // namespace
}  // namespace abox::testing
