// `abox doctor`'s vocabulary: a named check with a verdict, a one-line reason and what to do;
// the residual risks that hold on this host; and the host view every check reads through.
//
// Every file and /proc read of a check goes through HostView, whose root is "/" for real and a
// scratch tree in tests (a fake /proc/<pid>/status, environ, ns/ and fd/ links). What cannot be
// a file (running QEMU's --version, free disk space, the KVM verdict) is a function member the
// tests replace. The checks only read: doctor observes and never changes state.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace abox::cli {

enum class CheckStatus { kPass, kWarn, kFail, kInfo };

// "pass" | "warn" | "fail" | "info".
[[nodiscard]] const char* CheckStatusName(CheckStatus status);

struct Check {
  std::string category;  // host | daemon | images | sandbox | egress | secrets
  std::string name;      // stable, dotted: "host.kvm", "sandbox.<id>.seccomp"
  CheckStatus status = CheckStatus::kInfo;
  std::string reason;  // one line: what was found
  std::string fix;     // what to do; empty when nothing is to be done
  // The raw value read, for machines (`--json`): "2" for Seccomp, the uid, a pid; or empty.
  std::string value;
};

// A residual risk that holds on this host, with why it holds.
struct Risk {
  std::string risk;
  std::string because;
};

struct DoctorReport {
  std::vector<Check> checks;
  std::vector<Risk> risks;
};

// 1 when any check failed, else 0.
[[nodiscard]] int DoctorExitCode(const DoctorReport& report);
// {"checks": [{category, name, status, reason, fix, value}], "risks": [{risk, because}],
//  "summary": {"pass", "warn", "fail", "info"}}.
[[nodiscard]] nlohmann::json DoctorJson(const DoctorReport& report);
// The checks grouped by category as tables, a summary line, and the risks table.
[[nodiscard]] std::string DoctorText(const DoctorReport& report);

// The host as the checks see it. Paths passed in are absolute host paths; they are read below
// `root`.
class HostView final {
 public:
  explicit HostView(std::filesystem::path root) : root_(std::move(root)) {}

  // A whole small file (bounded).
  [[nodiscard]] absl::StatusOr<std::string> Read(absl::string_view path) const;
  [[nodiscard]] absl::StatusOr<std::string> ReadLink(absl::string_view path) const;
  // Entry names, sorted.
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> List(absl::string_view path) const;
  // stat(2) (follows links) and lstat(2).
  [[nodiscard]] absl::StatusOr<struct stat> Stat(absl::string_view path) const;
  [[nodiscard]] absl::StatusOr<struct stat> Lstat(absl::string_view path) const;
  // Whether the file opens read-write (for /dev/kvm); the error names errno.
  [[nodiscard]] absl::Status OpenReadWrite(absl::string_view path) const;
  // `path` canonical (links resolved), still as a host path; `path` itself when that fails.
  [[nodiscard]] std::string Canonical(absl::string_view path) const;

  // The "Key:" field of a /proc/<pid>/status text, trimmed; nullopt when absent.
  [[nodiscard]] static std::optional<std::string> StatusField(absl::string_view status,
                                                              absl::string_view key);

  uid_t euid = 0;
  // Runs argv and returns its stdout (the host's: QEMU's --version and -help).
  std::function<absl::StatusOr<std::string>(const std::vector<std::string>&)> run;
  // Free bytes for an unprivileged user on the file system holding `path`.
  std::function<absl::StatusOr<uint64_t>(const std::string&)> free_bytes;
  // The text of a human monitor command (`info network`) asked of the QEMU whose QMP socket is
  // `qmp_socket`, over one short connection; unset: QMP is not asked.
  std::function<absl::StatusOr<std::string>(const std::string& qmp_socket,
                                            const std::string& command)>
      qmp_hmp;

 private:
  [[nodiscard]] std::string Under(absl::string_view path) const;
  std::filesystem::path root_;
};

// HostView of the real host ("/"), its functions wired to the system.
[[nodiscard]] HostView RealHostView();

}  // namespace abox::cli
