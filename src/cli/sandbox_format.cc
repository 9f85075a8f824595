#include "src/cli/sandbox_format.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "src/api/wire.h"
#include "src/cli/flags.h"
#include "src/cli/output.h"
#include "src/cli/terminal.h"

namespace abox::cli {
namespace {

constexpr size_t kShortId = 12;

std::string OrDash(std::string s) { return s.empty() ? "-" : s; }

std::string ShortId(const std::string& id) { return OrDash(id.substr(0, kShortId)); }

std::string Labels(const api::Sandbox& sandbox) {
  std::vector<std::string> parts;
  for (const auto& [key, value] : sandbox.labels) {  // sorted by key
    parts.push_back(absl::StrCat(key, "=", value));
  }
  return absl::StrJoin(parts, ",");
}

// "in 2h" for a TTL of 2h set a moment ago: rounded up, unlike ages.
std::string ExpiresIn(absl::Duration left) {
  if (left <= absl::ZeroDuration()) {
    return "now";
  }
  return "in " +
         FormatAge(absl::Ceil(left, left > absl::Minutes(1) ? absl::Minutes(1) : absl::Seconds(1)));
}

// "312.4 MiB/16 GiB": what the host holds of its disk (while it runs) of the size the guest sees.
std::string DiskText(const api::Sandbox& s) {
  std::string size = s.disk_mib > 0 ? FormatMib(s.disk_mib) : "image";
  if (s.disk_used_bytes <= 0) {
    return s.disk_mib > 0 ? size : "-";
  }
  return absl::StrCat(HumanBytes(static_cast<uint64_t>(s.disk_used_bytes)), "/", size);
}

std::vector<std::string> SandboxRow(const api::Sandbox& s, absl::Time now) {
  bool running = s.state == "creating" || s.state == "ready";
  return {
      ShortId(s.id),
      OrDash(s.name),
      OrDash(s.image),
      OrDash(s.state),
      s.cpus > 0 ? std::to_string(s.cpus) : "-",
      s.memory_mib > 0 ? FormatMib(s.memory_mib) : "-",
      DiskText(s),
      s.created_at ? FormatAge(now - *s.created_at) : "-",
      s.expires_at && running ? ExpiresIn(*s.expires_at - now) : "-",
      OrDash(Labels(s)),
  };
}

// "1.2s", "2m3.4s", "0s": to a tenth of a second.
std::string ShortDuration(absl::Duration d) {
  d = absl::Trunc(d, absl::Milliseconds(100));
  return d == absl::ZeroDuration() ? "0s" : absl::FormatDuration(d);
}

std::string FormatUtc(absl::Time t, const char* format) {
  return absl::FormatTime(format, t, absl::UTCTimeZone());
}

// A scalar for a one-line summary; nested values compact JSON.
std::string Scalar(const nlohmann::json& v) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    return s.find_first_of(" \t\n") == std::string::npos && !s.empty() ? s : api::Dump(v);
  }
  return api::Dump(v);
}

std::string Summary(const nlohmann::json& payload) {
  constexpr size_t kMax = 120;
  std::string out;
  if (payload.is_object()) {
    std::vector<std::string> parts;
    for (const auto& [key, value] : payload.items()) {
      parts.push_back(absl::StrCat(key, "=", Scalar(value)));
    }
    out = absl::StrJoin(parts, " ");
  } else if (!payload.is_null()) {
    out = Scalar(payload);
  }
  if (out.size() > kMax) {
    out = out.substr(0, kMax - 3) + "...";
  }
  return out;
}

}  // namespace

std::string SandboxTable(const std::vector<api::Sandbox>& sandboxes, absl::Time now) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(sandboxes.size());
  for (const api::Sandbox& s : sandboxes) {
    rows.push_back(SandboxRow(s, now));
  }
  return FormatTable(
      {"ID", "NAME", "IMAGE", "STATE", "CPUS", "MEM", "DISK", "AGE", "EXPIRES", "LABELS"}, rows);
}

std::string FormatMib(int64_t mib) {
  if (mib < 1024) {
    return absl::StrCat(mib, " MiB");
  }
  if (mib % 1024 == 0) {
    return absl::StrCat(mib / 1024, " GiB");
  }
  return absl::StrFormat("%.1f GiB", static_cast<double>(mib) / 1024.0);
}

std::string ExecCommandText(const api::Exec& exec) {
  if (!exec.argv.empty()) {
    return ShellJoin(exec.argv);
  }
  return ShellJoin({"sh", "-c", exec.shell});
}

std::string ExecHeader(const api::Exec& exec) {
  std::string result;
  if (exec.timed_out) {
    result = "timed out";
  } else if (exec.exit_code && exec.state == "exited") {
    result = absl::StrCat("exited ", *exec.exit_code);
  } else if (exec.signal) {
    result = absl::StrCat("killed by SIG", SignalName(static_cast<int>(*exec.signal)));
  } else {
    result = OrDash(exec.state);
  }
  if (!exec.error.empty()) {
    absl::StrAppend(&result, ": ", exec.error);
  }
  if (exec.oom_kills > 0) {
    absl::StrAppend(&result, exec.signal == 9 && !exec.timed_out ? ", out of memory" : "",
                    " [OOM killer: ", exec.oom_kills,
                    exec.oom_kills == 1 ? " process" : " processes", "]");
  }
  if (exec.started_at && exec.finished_at) {
    absl::StrAppend(&result, " (", ShortDuration(*exec.finished_at - *exec.started_at), ")");
  }
  return absl::StrCat("==> exec ", ShortId(exec.id), " at ",
                      exec.started_at ? FormatUtc(*exec.started_at, "%Y-%m-%d %H:%M:%S UTC") : "?",
                      ": ", ExecCommandText(exec), " -> ", result);
}

std::string EventLine(const api::Event& event) {
  std::string line = absl::StrFormat(
      "%-20s  %-13s  %-12s  %s", event.time ? FormatUtc(*event.time, "%Y-%m-%dT%H:%M:%SZ") : "-",
      OrDash(event.type), ShortId(event.sandbox_id), Summary(event.payload));
  return std::string(absl::StripTrailingAsciiWhitespace(line));
}

std::string DaemonStatusText(const api::Health& health, const api::Version& version,
                             const std::string& socket_path) {
  std::vector<std::pair<std::string, std::string>> rows;
  std::string state = "running";
  if (health.pid) {
    absl::StrAppend(&state, ", pid ", *health.pid);
  }
  if (health.uptime_seconds) {
    absl::StrAppend(
        &state, ", up ",
        ShortDuration(absl::Trunc(absl::Seconds(*health.uptime_seconds), absl::Seconds(1))));
  }
  rows.emplace_back("aboxd", state);
  rows.emplace_back("socket", socket_path);
  rows.emplace_back("version", absl::StrCat(OrDash(version.version), " (API ", OrDash(version.api),
                                            ", guest protocol ", version.protocol, ")"));
  if (health.sandboxes) {
    rows.emplace_back("sandboxes", absl::StrCat(*health.sandboxes, " running"));
  }
  rows.emplace_back("accel", OrDash(health.accel));
  if (const std::optional<api::Ledger>& ledger = health.ledger) {
    auto used_of = [](int64_t used, int64_t budget, auto format) {
      return absl::StrCat(format(used), " of ", format(budget), " in use");
    };
    rows.emplace_back("vCPUs", used_of(ledger->cpus_used, ledger->cpus_budget,
                                       [](int64_t v) { return std::to_string(v); }));
    rows.emplace_back("memory",
                      used_of(ledger->memory_mib_used, ledger->memory_mib_budget, FormatMib));
  }
  if (const std::optional<api::Pool>& pool = health.pool) {
    std::string line = absl::StrCat(pool->size, " idle VM(s) kept per image and size; ",
                                    pool->handed_out, " handed out");
    if (pool->memory_low) {
      absl::StrAppend(&line, "; the host is short of memory: draining");
    }
    rows.emplace_back("pool", line);
    for (const api::PoolShapeInfo& s : pool->shapes) {
      std::string shape = absl::StrCat("  ", s.image, ", ", s.cpus, " vCPU, ",
                                       FormatMib(s.memory_mib), ": ", s.idle, " idle");
      if (s.filling) {
        absl::StrAppend(&shape, ", 1 starting");
      }
      if (!s.last_error.empty()) {
        absl::StrAppend(&shape, "; last fill failed: ", s.last_error);
      }
      rows.emplace_back("", shape);
    }
  }
  std::string out;
  for (const auto& [key, value] : rows) {
    absl::StrAppend(&out, absl::StrFormat("%-10s %s\n", key, value));
  }
  return out;
}

}  // namespace abox::cli
