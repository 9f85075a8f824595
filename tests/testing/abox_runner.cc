#include "tests/testing/abox_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/base/unique_fd.h"

extern char** environ;

namespace abox::testing {
namespace {

uint64_t RssKib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      uint64_t v = 0;
      std::string num = line.substr(6);
      num.erase(0, num.find_first_not_of(" \t"));
      num = num.substr(0, num.find(' '));
      if (absl::SimpleAtoi(num, &v)) {
        return v;
      }
    }
  }
  return 0;
}

}  // namespace

std::string AboxBin() {
  const char* p = std::getenv("ABOX_BIN");  // NOLINT(concurrency-mt-unsafe)
  return p ? p : "abox";
}

AboxResult RunAbox(const AboxCall& call) {
  AboxResult r;
  auto in = base::MakePipe();
  auto out = base::MakePipe();
  auto err = base::MakePipe();
  EXPECT_TRUE(in.ok() && out.ok() && err.ok());
  std::map<std::string, std::string> env_map;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    env_map[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : call.env) {
    if (v.empty()) {
      env_map.erase(k);
    } else {
      env_map[k] = v;
    }
  }
  std::vector<std::string> env;
  for (const auto& [k, v] : env_map) {
    env.push_back(k + "=" + v);
  }
  base::SpawnOptions o;
  o.argv = {AboxBin()};
  o.argv.insert(o.argv.end(), call.args.begin(), call.args.end());
  o.env = env;
  o.stdin_fd = in->read.get();
  o.stdout_fd = out->write.get();
  o.stderr_fd = err->write.get();
  auto child = base::ChildProcess::Spawn(o);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) {
    return r;
  }
  in->read.reset();
  out->write.reset();
  err->write.reset();
  (void)base::SetNonBlocking(in->write.get());
  size_t stdin_off = 0;
  if (call.stdin_data.empty() && call.close_stdin) {
    in->write.reset();
  }
  bool notified = call.on_output == nullptr;
  uint64_t counted = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(call.timeout_seconds);
  char buf[65536];
  int open_fds = 2;
  while (open_fds > 0) {
    pollfd fds[3] = {
        {out->read.get(), POLLIN, 0}, {err->read.get(), POLLIN, 0}, {in->write.get(), POLLOUT, 0}};
    int n = ::poll(fds, in->write ? 3 : 2, 50);
    r.peak_rss_kib = std::max(r.peak_rss_kib, RssKib(child->pid()));
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "abox did not finish within " << call.timeout_seconds << " s";
      (void)child->Kill(SIGKILL);
      break;
    }
    if (n <= 0) {
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) {
        continue;
      }
      ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (got <= 0) {
        (i == 0 ? out->read : err->read).reset();
        --open_fds;
        continue;
      }
      if (i == 0 && call.count_stdout_only) {
        counted += static_cast<uint64_t>(got);
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(got));
      }
      if (!notified && i == 0 && r.out.find(call.when_output) != std::string::npos) {
        notified = true;
        call.on_output(child->pid());
      }
    }
    if (in->write && (fds[2].revents & (POLLOUT | POLLERR))) {
      ssize_t w = ::write(in->write.get(), call.stdin_data.data() + stdin_off,
                          call.stdin_data.size() - stdin_off);
      if (w > 0) {
        stdin_off += static_cast<size_t>(w);
      }
      if (w < 0 && errno != EAGAIN) {
        in->write.reset();
      }
      if (stdin_off == call.stdin_data.size() && call.close_stdin) {
        in->write.reset();
      }
    }
  }
  auto status = child->Wait();
  r.exit_code = status.ok() ? status->ShellCode() : -1;
  if (call.stdout_bytes) {
    *call.stdout_bytes = counted;
  }
  return r;
}

std::vector<pid_t> ProcessesMatching(const std::string& needle) {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid) || pid == ::getpid()) {
      continue;
    }
    auto cmdline = base::ReadFile(entry.path().string() + "/cmdline", 1 << 20);
    if (cmdline.ok() && cmdline->find(needle) != std::string::npos) {
      pids.push_back(pid);
    }
  }
  return pids;
}

std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) {
      continue;
    }
    auto stat = base::ReadFile(entry.path().string() + "/stat", 4096);
    if (!stat.ok()) {
      continue;
    }
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
    size_t close = stat->rfind(')');
    pid_t ppid = 0;
    if (close != std::string::npos) {
      std::vector<std::string> fields = absl::StrSplit(stat->substr(close + 2), ' ');
      if (fields.size() > 1 && absl::SimpleAtoi(fields[1], &ppid) && ppid == parent) {
        pids.push_back(pid);
      }
    }
  }
  return pids;
}

std::vector<std::string> ListTree(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    out.push_back(std::filesystem::relative(it->path(), dir).string());
  }
  return out;
}

void RemoveAllSandboxes(const std::function<AboxResult(std::vector<std::string>)>& abox) {
  AboxResult ids = abox({"ls", "-a", "-q"});
  for (absl::string_view id : absl::StrSplit(ids.out, '\n', absl::SkipEmpty())) {
    abox({"rm", "-f", std::string(id)});
  }
}

std::string AboxHome() {
  const char* h = std::getenv("ABOX_HOME");  // NOLINT(concurrency-mt-unsafe)
  if (h) {
    return h;
  }
  return std::string(std::getenv("HOME")) + "/.local/share/abox";  // NOLINT
}

std::string SharedAboxHome() {
  const char* h = std::getenv("ABOX_E2E_SHARED_HOME");  // NOLINT(concurrency-mt-unsafe)
  if (h != nullptr && h[0] != '\0') {
    return h;
  }
  return AboxHome();
}

AboxResult BuildSharedImage(const std::vector<std::string>& args) {
  std::string home = SharedAboxHome();
  std::filesystem::create_directories(home);
  base::UniqueFd lock(
      ::open((home + "/.image-build.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock || ::flock(lock.get(), LOCK_EX) != 0) {
    AboxResult r;
    r.err = "cannot lock " + home + "/.image-build.lock";
    return r;
  }
  AboxCall call;
  call.args = {"image", "build"};
  call.args.insert(call.args.end(), args.begin(), args.end());
  call.env = {{"ABOX_HOME", home}};
  call.timeout_seconds = 600;
  return RunAbox(call);  // the lock goes with `lock`
}

std::vector<std::string> GuestShellArgs(const std::string& id, const std::string& script,
                                        bool root) {
  std::vector<std::string> args = {"exec", id};
  if (root) {
    args.push_back("--root");
  }
  args.insert(args.end(), {"--", "sh", "-c", script + "; echo exit=$?"});
  return args;
}

pid_t ListenerPid(const std::string& path) {
  base::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (!fd || path.size() >= sizeof(addr.sun_path)) {
    return -1;
  }
  path.copy(addr.sun_path, path.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return -1;
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return -1;
  }
  return cred.pid;
}

void ExpectNoLeftovers() {
  std::string sandboxes = AboxHome() + "/sandboxes";
  std::vector<pid_t> procs;
  std::vector<std::string> files;
  for (int i = 0; i < 200; ++i) {
    procs = ProcessesMatching(sandboxes);
    files = ListTree(sandboxes);
    if (procs.empty() && files.empty()) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(procs.empty()) << procs.size() << " VM processes survived, e.g. pid " << procs[0];
  EXPECT_TRUE(files.empty()) << "sandbox files survived in " << sandboxes << ", e.g. " << files[0];
}

}  // namespace abox::testing
