// Runs the real aboxd for end-to-end tests, in a private $ABOX_HOME (whose images/ points at the
// test image) with its socket inside it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/base/child_process.h"

namespace abox::testing {

// Path of the aboxd binary under test: $ABOXD_BIN, else the aboxd next to AboxBin().
std::string AboxdBin();

// A private home for one test: a temp dir with images/ linked to the shared test image
// directory. Removed (after stopping anything left) when destroyed.
class DaemonHome final {
 public:
  DaemonHome();
  ~DaemonHome();
  DaemonHome(const DaemonHome&) = delete;
  DaemonHome& operator=(const DaemonHome&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string socket() const { return path_ + "/run/aboxd.sock"; }
  // ABOX_HOME and ABOX_SOCKET for processes of this test (abox, aboxd), and ABOX_POOL=0 (a test
  // that wants a warm pool passes aboxd --pool N).
  [[nodiscard]] std::map<std::string, std::string> Env() const;

 private:
  std::string path_;
};

// One aboxd process. Start() waits until it answers GET /v1/health.
class AboxdProcess final {
 public:
  explicit AboxdProcess(const DaemonHome& home) : home_(&home) {}
  ~AboxdProcess();

  absl::Status Start(const std::vector<std::string>& extra_args = {});
  // SIGTERM and wait (sandboxes stay up, as with a real stop).
  absl::Status Stop();
  // SIGKILL and reap: a crash.
  void Kill();
  [[nodiscard]] pid_t pid() const;
  // What it wrote to stderr so far (its log).
  [[nodiscard]] std::string Log() const;

 private:
  const DaemonHome* home_;
  std::optional<base::ChildProcess> process_;
  std::string log_path_;
};

}  // namespace abox::testing
