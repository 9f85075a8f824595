#include "tests/testing/aboxd_process.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/http/testing/http_test_client.h"
#include "tests/testing/abox_runner.h"

namespace abox::testing {

std::string AboxdBin() {
  const char* bin = std::getenv("ABOXD_BIN");  // NOLINT(concurrency-mt-unsafe)
  if (bin != nullptr && bin[0] != '\0') {
    return bin;
  }
  // The build puts every executable side by side: aboxd is next to the abox under test.
  return (std::filesystem::path(AboxBin()).parent_path() / "aboxd").string();
}

DaemonHome::DaemonHome() {
  std::string tmpl = "/tmp/abox-daemon-e2e-XXXXXX";
  if (::mkdtemp(tmpl.data()) != nullptr) {
    path_ = tmpl;
  }
  std::error_code ec;
  std::filesystem::create_directory_symlink(AboxHome() + "/images", path_ + "/images", ec);
  // Golden templates are not shared: an aboxd removes the templates it finds stale once no VM
  // of its own home stands on them, and it cannot see the VMs of the other tests' homes (a
  // shared folder lost a template under a running test's sandbox). Each home makes its own.
}

DaemonHome::~DaemonHome() {
  // Nothing of this test may outlive it: VMs whose command line names this home are killed.
  for (pid_t pid : ProcessesMatching(path_)) {
    ::kill(pid, SIGKILL);
  }
  for (int i = 0; i < 100 && !ProcessesMatching(path_).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::error_code ec;
  std::filesystem::remove(path_ + "/images", ec);  // the link, not the shared folder
  std::filesystem::remove_all(path_, ec);
}

std::map<std::string, std::string> DaemonHome::Env() const {
  // No warm pool unless a test asks (aboxd --pool N): idle pooled VMs would take CPU from the
  // tests running beside it on a 2-core runner, and their reservations would show in ledgers.
  // `abox run` boots directly (no aboxd): the run tests are about the runtime (a VM that dies
  // with abox, exit codes, the QEMU jail); RunThroughDaemonTest takes the aboxd path.
  return {{"ABOX_HOME", path_},
          {"ABOX_SOCKET", socket()},
          {"ABOX_POOL", "0"},
          {"ABOX_RUN_DIRECT", "1"}};
}

AboxdProcess::~AboxdProcess() { Kill(); }

absl::Status AboxdProcess::Start(const std::vector<std::string>& extra_args) {
  log_path_ = home_->path() + "/aboxd.log";
  int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) {
    return absl::InternalError("cannot open the aboxd log");
  }
  base::SpawnOptions options;
  options.argv = {AboxdBin(), "--log-level", "debug"};
  options.argv.insert(options.argv.end(), extra_args.begin(), extra_args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("ABOX_HOME=", 0) != 0 && kv.rfind("ABOX_SOCKET=", 0) != 0) {
      env.push_back(kv);
    }
  }
  for (const auto& [k, v] : home_->Env()) {
    env.push_back(absl::StrCat(k, "=", v));
  }
  options.env = env;
  options.stdout_fd = log;
  options.stderr_fd = log;
  options.new_session = true;  // like the CLI's auto-start: not in the test's process group
  absl::StatusOr<base::ChildProcess> child = base::ChildProcess::Spawn(options);
  ::close(log);
  if (!child.ok()) {
    return child.status();
  }
  process_ = *std::move(child);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto exited = process_->TryWait()) {
      return absl::UnavailableError(
          absl::StrCat("aboxd exited (", exited->ToString(), "):\n", Log()));
    }
    auto client = http::httptest::HttpTestClient::ConnectUnix(home_->socket());
    if (client.ok()) {
      auto r = (*client)->Request("GET", "/v1/health");
      if (r.ok() && r->status == 200) {
        return absl::OkStatus();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("aboxd did not answer:\n", Log()));
}

absl::Status AboxdProcess::Stop() {
  if (!process_) {
    return absl::OkStatus();
  }
  (void)process_->Kill(SIGTERM);
  absl::StatusOr<base::ExitStatus> status = process_->Wait(std::chrono::seconds(60));
  process_.reset();
  if (!status.ok()) {
    return status.status();
  }
  if (status->ShellCode() != 0) {
    return absl::InternalError(absl::StrCat("aboxd ended with ", status->ToString()));
  }
  return absl::OkStatus();
}

void AboxdProcess::Kill() {
  if (process_) {
    process_->KillAndReap();
    process_.reset();
  }
}

pid_t AboxdProcess::pid() const { return process_ ? process_->pid() : -1; }

std::string AboxdProcess::Log() const {
  auto data = base::ReadFile(log_path_, 1 << 20);
  return data.ok() ? *data : "";
}

}  // namespace abox::testing
