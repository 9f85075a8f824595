#include "bench/daemon_fixture.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/host_layout.h"
#include "src/base/io.h"

namespace abox::bench {

namespace fs = std::filesystem;
using http::httptest::HttpTestClient;
using http::httptest::Response;

absl::StatusOr<std::unique_ptr<BenchHome>> BenchHome::Create(const std::string& source_home) {
  std::string tmpl = "/tmp/abox-daemon-bench-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return absl::ErrnoToStatus(errno, "mkdtemp(/tmp/abox-daemon-bench-XXXXXX)");
  }
  std::unique_ptr<BenchHome> home(new BenchHome(tmpl));
  std::error_code ec;
  fs::create_directory_symlink(fs::path(source_home) / "images", tmpl + "/images", ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot link ", tmpl, "/images: ", ec.message()));
  }
  fs::create_directories(tmpl + "/cache", ec);
  fs::copy_file(fs::path(source_home) / "cache/kvm-probe.json", tmpl + "/cache/kvm-probe.json",
                ec);  // optional: without it aboxd probes KVM itself
  return home;
}

BenchHome::~BenchHome() {
  std::vector<pid_t> left = ProcessesMatching(path_);
  if (!left.empty()) {
    std::fprintf(stderr, "daemon_bench: %zu process(es) still name %s: killing them\n", left.size(),
                 path_.c_str());
  }
  for (pid_t pid : left) {
    ::kill(pid, SIGKILL);
  }
  for (int i = 0; i < 100 && !ProcessesMatching(path_).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::error_code ec;
  fs::remove(path_ + "/images", ec);  // the link, not the shared images
  fs::remove_all(path_, ec);
}

void BenchHome::PrintLogTail() const {
  auto log = base::ReadFile(this->log(), 1 << 20);
  if (log.ok() && !log->empty()) {
    std::fprintf(stderr, "--- end of aboxd's log ---\n%s\n",
                 log->substr(log->size() > 4096 ? log->size() - 4096 : 0).c_str());
  }
}

absl::StatusOr<base::ChildProcess> StartAboxd(const std::string& bin, const BenchHome& home,
                                              const std::vector<std::string>& extra_args) {
  int log = ::open(home.log().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) {
    return absl::ErrnoToStatus(errno, "open(aboxd.log)");
  }
  base::SpawnOptions options;
  options.argv = {bin, "--socket", home.socket()};
  options.argv.insert(options.argv.end(), extra_args.begin(), extra_args.end());
  options.stdout_fd = log;
  options.stderr_fd = log;
  options.new_session = true;  // Ctrl-C reaches the bench, which then cleans up in order
  absl::StatusOr<base::ChildProcess> child = base::ChildProcess::Spawn(options);
  ::close(log);
  if (!child.ok()) {
    return child.status();
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto exited = child->TryWait()) {
      return absl::UnavailableError(absl::StrCat("aboxd exited (", exited->ToString(), ")"));
    }
    if (Call(home, "GET", "/v1/health", "", /*quiet=*/true).status == 200) {
      return child;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError("aboxd did not answer GET /v1/health within 30 s");
}

absl::StatusOr<base::ChildProcess> StartAboxdWithPool(const std::string& bin, const BenchHome& home,
                                                      int pool,
                                                      const std::vector<std::string>& budget) {
  std::vector<std::string> args = {"--pool", std::to_string(pool)};
  args.insert(args.end(), budget.begin(), budget.end());
  return StartAboxd(bin, home, args);
}

void StopAboxd(base::ChildProcess& aboxd) {
  (void)aboxd.Kill(SIGTERM);
  if (!aboxd.Wait(std::chrono::seconds(60)).ok()) {
    aboxd.KillAndReap();
  }
}

std::unique_ptr<HttpTestClient> Connect(const BenchHome& home, bool quiet) {
  auto c = HttpTestClient::ConnectUnix(home.socket());
  if (!c.ok()) {
    if (!quiet) {
      std::fprintf(stderr, "daemon_bench: connect %s: %s\n", home.socket().c_str(),
                   std::string(c.status().message()).c_str());
    }
    return nullptr;
  }
  return *std::move(c);
}

Response Call(const BenchHome& home, const std::string& method, const std::string& target,
              const std::string& body, bool quiet) {
  auto c = Connect(home, quiet);
  if (c == nullptr) {
    return {};
  }
  auto r = c->Request(method, target, body);
  return r.ok() ? *r : Response{};
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  auto i = std::min(v.size() - 1,
                    static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1))));
  return v[i];
}

nlohmann::json Summary(const std::vector<double>& v) {
  return {{"n", v.size()},
          {"min", Percentile(v, 0)},
          {"median", Percentile(v, 0.5)},
          {"p90", Percentile(v, 0.9)},
          {"p99", Percentile(v, 0.99)},
          {"max", Percentile(v, 1)}};
}

std::vector<pid_t> ProcessesMatching(const std::string& needle) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid) || pid == ::getpid()) {
      continue;
    }
    auto cmdline = base::ReadFile(entry.path().string() + "/cmdline", 1 << 16);
    if (cmdline.ok() && cmdline->find(needle) != std::string::npos) {
      pids.push_back(pid);
    }
  }
  return pids;
}

double CpuMicros(pid_t pid) {
  auto stat = base::ReadFile(absl::StrCat("/proc/", pid, "/stat"), 4096);
  if (!stat.ok() || stat->rfind(')') == std::string::npos) {
    return 0;
  }
  // The fields after the ")" that ends the command name start at field 3 (state); utime and
  // stime are fields 14 and 15.
  std::vector<std::string> f = absl::StrSplit(stat->substr(stat->rfind(')') + 2), ' ');
  double utime = 0;
  double stime = 0;
  if (f.size() <= 12 || !absl::SimpleAtod(f[11], &utime) || !absl::SimpleAtod(f[12], &stime)) {
    return 0;
  }
  return (utime + stime) * 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string SelfDir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : self.parent_path().string();
}

absl::StatusOr<double> TimeCli(const BenchHome& home, const std::vector<std::string>& argv) {
  std::string err_path = home.path() + "/cli.err";
  int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (err < 0) {
    return absl::InternalError("cannot open " + err_path);
  }
  base::SpawnOptions options;
  options.argv = argv;
  options.stderr_fd = err;
  auto t0 = std::chrono::steady_clock::now();
  auto child = base::ChildProcess::Spawn(options);
  ::close(err);
  if (!child.ok()) {
    return child.status();
  }
  auto ended = child->Wait(std::chrono::seconds(60));
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!ended.ok() || ended->ShellCode() != 0) {
    auto text = base::ReadFile(err_path, 4096);
    return absl::InternalError(absl::StrCat(ended.ok() ? ended->ToString() : "no exit within 60 s",
                                            ": ", text.ok() ? *text : ""));
  }
  return ms;
}

std::unique_ptr<BenchHome> EnterBenchHome(const char* program, const std::string& aboxd,
                                          void (*on_signal)(int)) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  auto die = [program](const std::string& what) {
    std::fprintf(stderr, "%s: %s\n", program, what.c_str());
    std::exit(1);  // NOLINT(concurrency-mt-unsafe): only before anything needs cleaning up
  };
  auto paths = base::ResolveHostLayout();
  if (!paths.ok()) {
    die(std::string(paths.status().message()));
  }
  if (!std::filesystem::exists(paths->ImageDir("default"))) {
    die(absl::StrCat("no image at ", paths->ImageDir("default").string(),
                     ": build it first (abox image build) or set ABOX_HOME"));
  }
  if (::access(aboxd.c_str(), X_OK) != 0) {
    die(absl::StrCat("no aboxd at ", aboxd, ": build it or pass --aboxd PATH"));
  }
  auto created = BenchHome::Create(paths->home.string());
  if (!created.ok()) {
    die(std::string(created.status().message()));
  }
  std::unique_ptr<BenchHome> home = *std::move(created);
  ::setenv("ABOX_HOME", home->path().c_str(), 1);      // NOLINT(concurrency-mt-unsafe)
  ::setenv("ABOX_SOCKET", home->socket().c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  ::setenv("ABOX_NO_AUTOSTART", "1", 1);               // NOLINT(concurrency-mt-unsafe)
  return home;
}

}  // namespace abox::bench
