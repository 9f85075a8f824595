#include "src/cli/doctor_check.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"
#include "src/cli/output.h"
#include "src/vmm/qmp_client.h"

namespace abox::cli {

const char* CheckStatusName(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kWarn:
      return "warn";
    case CheckStatus::kFail:
      return "fail";
    case CheckStatus::kInfo:
      return "info";
  }
  return "info";
}

int DoctorExitCode(const DoctorReport& report) {
  return std::any_of(report.checks.begin(), report.checks.end(),
                     [](const Check& c) { return c.status == CheckStatus::kFail; })
             ? 1
             : 0;
}

namespace {

std::map<std::string, int> Counts(const DoctorReport& report) {
  std::map<std::string, int> counts = {{"pass", 0}, {"warn", 0}, {"fail", 0}, {"info", 0}};
  for (const Check& c : report.checks) {
    ++counts[CheckStatusName(c.status)];
  }
  return counts;
}

}  // namespace

nlohmann::json DoctorJson(const DoctorReport& report) {
  nlohmann::json checks = nlohmann::json::array();
  for (const Check& c : report.checks) {
    checks.push_back({{"category", c.category},
                      {"name", c.name},
                      {"status", CheckStatusName(c.status)},
                      {"reason", c.reason},
                      {"fix", c.fix},
                      {"value", c.value}});
  }
  nlohmann::json risks = nlohmann::json::array();
  for (const Risk& r : report.risks) {
    risks.push_back({{"risk", r.risk}, {"because", r.because}});
  }
  nlohmann::json summary = nlohmann::json::object();
  for (const auto& [status, n] : Counts(report)) {
    summary[status] = n;
  }
  return {{"checks", checks}, {"risks", risks}, {"summary", summary}};
}

std::string DoctorText(const DoctorReport& report) {
  std::string out;
  std::vector<std::string> categories;
  for (const Check& c : report.checks) {
    if (std::find(categories.begin(), categories.end(), c.category) == categories.end()) {
      categories.push_back(c.category);
    }
  }
  for (const std::string& category : categories) {
    std::vector<std::vector<std::string>> rows;
    for (const Check& c : report.checks) {
      if (c.category != category) {
        continue;
      }
      rows.push_back({CheckStatusName(c.status), c.name, c.reason});
      if (!c.fix.empty()) {
        rows.push_back({"", "", absl::StrCat("-> ", c.fix)});
      }
    }
    absl::StrAppend(&out, absl::AsciiStrToUpper(category), "\n",
                    FormatTable({"", "CHECK", "FINDING"}, rows), "\n");
  }
  std::map<std::string, int> counts = Counts(report);
  absl::StrAppend(&out, counts["pass"], " passed, ", counts["warn"], " warnings, ", counts["fail"],
                  " failed, ", counts["info"], " info\n");
  if (!report.risks.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const Risk& r : report.risks) {
      rows.push_back({r.risk, r.because});
    }
    absl::StrAppend(&out, "\nRESIDUAL RISKS ON THIS HOST\n", FormatTable({"RISK", "WHY"}, rows));
  }
  return out;
}

std::string HostView::Under(absl::string_view path) const {
  std::string p(path);
  if (root_ == "/" || root_.empty()) {
    return p;
  }
  return (root_ / std::filesystem::path(p).relative_path()).string();
}

absl::StatusOr<std::string> HostView::Read(absl::string_view path) const {
  return base::ReadFile(Under(path), 1 << 20);
}

absl::StatusOr<std::string> HostView::ReadLink(absl::string_view path) const {
  char buf[4096];
  std::string under = Under(path);
  ssize_t n = ::readlink(under.c_str(), buf, sizeof(buf));
  if (n < 0) {
    return base::ErrnoError(absl::StrCat("readlink(", path, ")"));
  }
  return std::string(buf, static_cast<size_t>(n));
}

absl::StatusOr<std::vector<std::string>> HostView::List(absl::string_view path) const {
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(Under(path), ec)) {
    names.push_back(entry.path().filename().string());
  }
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot list ", path, ": ", ec.message()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<struct stat> HostView::Stat(absl::string_view path) const {
  struct stat st {};
  if (::stat(Under(path).c_str(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("stat(", path, ")"));
  }
  return st;
}

absl::StatusOr<struct stat> HostView::Lstat(absl::string_view path) const {
  struct stat st {};
  if (::lstat(Under(path).c_str(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("lstat(", path, ")"));
  }
  return st;
}

absl::Status HostView::OpenReadWrite(absl::string_view path) const {
  base::UniqueFd fd(::open(Under(path).c_str(), O_RDWR | O_CLOEXEC));
  return fd ? absl::OkStatus() : base::ErrnoError(absl::StrCat("open(", path, ")"));
}

std::string HostView::Canonical(absl::string_view path) const {
  std::error_code ec;
  std::filesystem::path resolved = std::filesystem::canonical(Under(path), ec);
  if (ec) {
    return std::string(path);
  }
  if (root_ == "/" || root_.empty()) {
    return resolved.string();
  }
  std::filesystem::path root = std::filesystem::canonical(root_, ec);
  return (std::filesystem::path("/") / resolved.lexically_relative(root)).string();
}

std::optional<std::string> HostView::StatusField(absl::string_view status, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (absl::StartsWith(line, key) && line.size() > key.size() && line[key.size()] == ':') {
      return std::string(absl::StripAsciiWhitespace(line.substr(key.size() + 1)));
    }
  }
  return std::nullopt;
}

HostView RealHostView() {
  HostView view("/");
  view.euid = ::geteuid();
  view.run = [](const std::vector<std::string>& argv) -> absl::StatusOr<std::string> {
    ABOX_ASSIGN_OR_RETURN(base::CommandResult r, base::RunCommand(argv, 1 << 20));
    if (r.status.ShellCode() != 0) {
      return absl::InternalError(absl::StrCat(argv[0], " exited ", r.status.ShellCode()));
    }
    return r.out;
  };
  view.free_bytes = [](const std::string& path) -> absl::StatusOr<uint64_t> {
    struct statvfs st {};
    if (::statvfs(path.c_str(), &st) != 0) {
      return base::ErrnoError(absl::StrCat("statvfs(", path, ")"));
    }
    return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  };
  view.qmp_hmp = [](const std::string& socket,
                    const std::string& command) -> absl::StatusOr<std::string> {
    constexpr std::chrono::milliseconds kTimeout(2000);
    ABOX_ASSIGN_OR_RETURN(vmm::QmpClient qmp, vmm::QmpClient::Connect(socket, kTimeout));
    ABOX_ASSIGN_OR_RETURN(nlohmann::json text, qmp.Execute("human-monitor-command",
                                                           {{"command-line", command}}, kTimeout));
    if (!text.is_string()) {
      return absl::InternalError(absl::StrCat("QMP ", command, ": not a string"));
    }
    return text.get<std::string>();
  };
  return view;
}

}  // namespace abox::cli
