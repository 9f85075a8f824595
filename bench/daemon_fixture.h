// The environment of one daemon_bench run: a private $ABOX_HOME and the aboxd serving it, plus
// the small process and HTTP helpers the bench needs around them.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "src/base/child_process.h"
#include "src/http/testing/http_test_client.h"

namespace abox::bench {

// A private $ABOX_HOME under /tmp: images/ is a link to the images of another home, the KVM
// verdict is copied from it (so that nothing probes again), and aboxd's socket and log live
// inside. Destroying it kills every process whose command line still names the home (VMs a
// crash left behind) and removes it. Not thread-safe.
class BenchHome final {
 public:
  static absl::StatusOr<std::unique_ptr<BenchHome>> Create(const std::string& source_home);
  ~BenchHome();
  BenchHome(const BenchHome&) = delete;
  BenchHome& operator=(const BenchHome&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string socket() const { return path_ + "/run/aboxd.sock"; }
  [[nodiscard]] std::string log() const { return path_ + "/aboxd.log"; }
  // Prints the end of aboxd's log to stderr (the log goes away with the home).
  void PrintLogTail() const;

 private:
  explicit BenchHome(std::string path) : path_(std::move(path)) {}

  std::string path_;
};

// The start of a daemon bench's main(): `on_signal` for SIGINT and SIGTERM, SIGPIPE ignored;
// checks that the source home (from the environment) has the default image and that `aboxd`
// is there; makes a BenchHome linked to it and points ABOX_HOME, ABOX_SOCKET and
// ABOX_NO_AUTOSTART at it (before any thread starts). Exits with `program`'s message on a
// failure.
std::unique_ptr<BenchHome> EnterBenchHome(const char* program, const std::string& aboxd,
                                          void (*on_signal)(int));

// Starts aboxd on the home's socket with this process's environment (which must point
// ABOX_HOME at the home), with `extra_args` after the socket, and waits until it answers
// GET /v1/health.
absl::StatusOr<base::ChildProcess> StartAboxd(const std::string& bin, const BenchHome& home,
                                              const std::vector<std::string>& extra_args = {});

// A step's own aboxd: StartAboxd with `--pool N` and `budget` (flags), and its end (SIGTERM;
// SIGKILL when it has not stopped within 60 s).
absl::StatusOr<base::ChildProcess> StartAboxdWithPool(const std::string& bin, const BenchHome& home,
                                                      int pool,
                                                      const std::vector<std::string>& budget);
void StopAboxd(base::ChildProcess& aboxd);

// A keep-alive connection to the home's aboxd; nullptr (said on stderr unless `quiet`) when
// it cannot connect.
std::unique_ptr<http::httptest::HttpTestClient> Connect(const BenchHome& home, bool quiet = false);

// One request on a fresh connection; status 0 when the daemon did not answer.
http::httptest::Response Call(const BenchHome& home, const std::string& method,
                              const std::string& target, const std::string& body = "",
                              bool quiet = false);

// The value at fraction `p` (0..1) of the sorted values, nearest rank; 0 when empty.
double Percentile(std::vector<double> v, double p);

// n, min, median, p90, p99 and max of `v`, for the --json reports.
nlohmann::json Summary(const std::vector<double>& v);

// Processes (other than this one) whose command line contains `needle`.
std::vector<pid_t> ProcessesMatching(const std::string& needle);

// utime + stime of a process so far, in microseconds (clock-tick resolution).
double CpuMicros(pid_t pid);

// The directory of this executable (where the build puts aboxd and abox too).
std::string SelfDir();

// Runs `argv` (stdout to /dev/null, stderr kept in the home for the error) and returns its
// wall time, spawn to exit, in milliseconds; an error when it fails or runs over 60 s.
absl::StatusOr<double> TimeCli(const BenchHome& home, const std::vector<std::string>& argv);

}  // namespace abox::bench
