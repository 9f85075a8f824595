#include "src/vmm/kvm_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/vmm/qemu_argv.h"

namespace abox::vmm {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int kCacheVersion = 1;
constexpr size_t kMaxCacheEntries = 16;
constexpr size_t kMaxCacheBytes = 1 << 20;
constexpr size_t kProbeOutputKeep = 64 << 10;

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json KeyToJson(const KvmProbeKey& k) {
  return {{"host_kernel", k.host_kernel},
          {"qemu_version", k.qemu_version},
          {"kernel_sha256", k.kernel_sha256},
          {"kernel_size", k.kernel_size}};
}

bool EntryMatches(const json& e, const KvmProbeKey& k) {
  auto str = [&e](const char* name) {
    auto it = e.find(name);
    return it != e.end() && it->is_string() ? it->get<std::string>() : std::string("\x01");
  };
  auto size = e.find("kernel_size");
  return str("host_kernel") == k.host_kernel && str("qemu_version") == k.qemu_version &&
         str("kernel_sha256") == k.kernel_sha256 && size != e.end() && size->is_number_unsigned() &&
         size->get<uint64_t>() == k.kernel_size;
}

// The cache's entries, or an empty array if the file is missing or not ours.
json ReadEntries(const std::string& path) {
  absl::StatusOr<std::string> text = base::ReadFile(path, kMaxCacheBytes);
  if (!text.ok()) {
    return json::array();
  }
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("version", 0) != kCacheVersion) {
    spdlog::warn("ignoring unreadable KVM probe cache {}", path);
    return json::array();
  }
  auto entries = j.find("entries");
  return entries != j.end() && entries->is_array() ? *entries : json::array();
}

AccelDecision FromVerdict(const KvmVerdict& v, const char* source) {
  if (v.usable) {
    return {Accel::kKvm, "", source};
  }
  return {Accel::kTcg, TcgFallbackWarning(v.detail), source};
}

}  // namespace

std::string TcgFallbackWarning(const std::string& why) {
  return absl::StrCat("KVM is not usable on this host (", why,
                      "); using TCG software emulation, expect ~10x slower VMs");
}

std::optional<KvmVerdict> LookupKvmVerdict(const std::string& cache_path, const KvmProbeKey& key) {
  if (cache_path.empty()) {
    return std::nullopt;
  }
  for (const json& e : ReadEntries(cache_path)) {
    if (!e.is_object() || !EntryMatches(e, key)) {
      continue;
    }
    auto usable = e.find("usable");
    if (usable == e.end() || !usable->is_boolean()) {
      continue;
    }
    KvmVerdict v;
    v.usable = usable->get<bool>();
    auto detail = e.find("detail");
    v.detail = detail != e.end() && detail->is_string() ? detail->get<std::string>() : "";
    auto evidence = e.find("evidence");
    v.evidence = evidence != e.end() && evidence->is_string() ? evidence->get<std::string>() : "";
    auto ms = e.find("probe_ms");
    v.probe_ms = ms != e.end() && ms->is_number_integer() ? ms->get<int64_t>() : 0;
    return v;
  }
  return std::nullopt;
}

absl::Status StoreKvmVerdict(const std::string& cache_path, const KvmProbeKey& key,
                             const KvmVerdict& verdict) {
  json kept = json::array();
  for (const json& e : ReadEntries(cache_path)) {
    if (e.is_object() && !EntryMatches(e, key)) {
      kept.push_back(e);
    }
  }
  json entry = KeyToJson(key);
  entry["usable"] = verdict.usable;
  entry["detail"] = verdict.detail;
  entry["evidence"] = verdict.evidence;
  entry["probe_ms"] = verdict.probe_ms;
  entry["probed_at_ms"] = UnixMs();
  kept.push_back(entry);
  while (kept.size() > kMaxCacheEntries) {
    kept.erase(kept.begin());
  }
  json file = {{"version", kCacheVersion}, {"entries", kept}};
  std::filesystem::path parent = std::filesystem::path(cache_path).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("mkdir ", parent.string(), ": ", ec.message()));
  }
  return base::WriteFileAtomic(cache_path, file.dump(2, ' ', false, json::error_handler_t::replace),
                               0644);
}

absl::StatusOr<AccelDecision> ResolveAccel(Accel requested, const AccelResolverDeps& deps) {
  if (deps.env_accel && !deps.env_accel->empty()) {
    absl::StatusOr<Accel> env = ParseAccel(*deps.env_accel);
    if (!env.ok()) {
      return base::Annotate(env.status(), "ABOX_ACCEL");
    }
    if (*env != Accel::kAuto) {
      return AccelDecision{*env, "", "ABOX_ACCEL"};
    }
    requested = Accel::kAuto;
  }
  if (requested != Accel::kAuto) {
    return AccelDecision{requested, "", "requested"};
  }
  if (absl::Status s = deps.open_kvm_device(); !s.ok()) {
    return AccelDecision{Accel::kTcg,
                         absl::StrCat("KVM is not available (", s.message(),
                                      "); using TCG software emulation, expect ~10x slower VMs"),
                         "no /dev/kvm"};
  }
  absl::StatusOr<KvmProbeKey> key = deps.key();
  if (!key.ok()) {
    spdlog::warn("KVM probe cache disabled: {}", key.status().ToString());
  } else if (std::optional<KvmVerdict> cached = LookupKvmVerdict(deps.cache_path, *key)) {
    return FromVerdict(*cached, "cache");
  }
  KvmVerdict verdict = deps.probe();
  spdlog::info("KVM probe: {} ({} ms): {}; last output: {}", verdict.usable ? "usable" : "unusable",
               verdict.probe_ms, verdict.detail, verdict.evidence);
  if (key.ok() && !deps.cache_path.empty()) {
    if (absl::Status s = StoreKvmVerdict(deps.cache_path, *key, verdict); !s.ok()) {
      spdlog::warn("could not cache the KVM probe verdict: {}", s.ToString());
    }
  }
  return FromVerdict(verdict, "probe");
}

absl::StatusOr<KvmProbeKey> ComputeKvmProbeKey(const KvmProbeOptions& o) {
  KvmProbeKey key;
  utsname u{};
  if (::uname(&u) != 0) {
    return base::ErrnoError("uname");
  }
  key.host_kernel = u.release;
  ABOX_ASSIGN_OR_RETURN(base::CommandResult version,
                        base::RunCommand({o.qemu_binary, "--version"}, 4096));
  std::vector<std::string> lines = absl::StrSplit(version.out, '\n');
  key.qemu_version = lines.empty() ? "" : std::string(absl::StripAsciiWhitespace(lines[0]));
  if (version.status.ShellCode() != 0 || key.qemu_version.empty()) {
    return absl::InternalError(absl::StrCat(o.qemu_binary, " --version failed"));
  }
  struct stat st {};
  if (::stat(o.kernel.c_str(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("stat(", o.kernel, ")"));
  }
  key.kernel_size = static_cast<uint64_t>(st.st_size);
  ABOX_ASSIGN_OR_RETURN(base::CommandResult sum, base::RunCommand({"sha256sum", o.kernel}, 4096));
  if (sum.status.ShellCode() != 0 || sum.out.size() < 64) {
    return absl::InternalError(absl::StrCat("sha256sum ", o.kernel, " failed: ", sum.err));
  }
  key.kernel_sha256 = sum.out.substr(0, 64);
  return key;
}

KvmVerdict ProbeKvm(const KvmProbeOptions& o) {
  Clock::time_point start = Clock::now();
  KvmVerdict v;
  std::string output;
  auto finish = [&](bool usable, std::string detail) {
    std::vector<absl::string_view> lines = absl::StrSplit(output, '\n', absl::SkipWhitespace());
    v.evidence = lines.empty() ? "" : std::string(absl::StripAsciiWhitespace(lines.back()));
    v.evidence = v.evidence.substr(0, 300);
    v.usable = usable;
    v.detail = std::move(detail);
    v.probe_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    return v;
  };
  absl::StatusOr<base::Pipe> out = base::MakePipe(O_NONBLOCK);
  if (!out.ok()) {
    return finish(false, absl::StrCat("probe could not start: ", out.status().message()));
  }
  // No initrd and no disk: a working guest panics at "VFS: Unable to mount root fs", and
  // panic=-1 plus -no-reboot turn that into a prompt QEMU exit.
  // Not quiet: the panic line must reach the console (it would anyway, at KERN_EMERG).
  std::string cmdline = absl::StrReplaceAll(KernelCmdline(o.tsc_khz, ""), {{" quiet", ""}});
  base::SpawnOptions so;
  so.argv = {o.qemu_binary,
             "-M",
             "microvm",
             "-nodefaults",
             "-no-user-config",
             "-nographic",
             "-no-reboot",
             "-sandbox",
             "on,obsolete=deny,elevateprivileges=deny,spawn=deny",
             "-accel",
             "kvm",
             "-cpu",
             "host",
             "-m",
             "256",
             "-smp",
             "1",
             "-kernel",
             o.kernel,
             "-append",
             cmdline,
             "-serial",
             "stdio"};
  so.stdout_fd = out->write.get();
  so.stderr_fd = out->write.get();
  so.parent_death_signal = SIGKILL;
  so.env = VmmChildEnvironment();  // as for the VMs' QEMU: nothing of the caller's
  so.close_other_fds = true;
  absl::StatusOr<base::ChildProcess> qemu = base::ChildProcess::Spawn(so);
  out->write.reset();
  if (!qemu.ok()) {
    return finish(false, absl::StrCat("probe could not start QEMU: ", qemu.status().message()));
  }
  Clock::time_point deadline = start + o.deadline;
  bool exited = false;
  while (!exited) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      qemu->KillAndReap();
      return finish(false, "probe boot hung");
    }
    pollfd p[2] = {{out->read.get(), POLLIN, 0}, {qemu->pidfd(), POLLIN, 0}};
    if (::poll(p, 2, static_cast<int>(left)) < 0 && errno != EINTR) {
      qemu->KillAndReap();
      return finish(false, "probe failed: poll");
    }
    exited = p[1].revents != 0;
    char buf[16384];
    for (;;) {
      absl::StatusOr<size_t> n = base::ReadSome(out->read.get(), buf, sizeof(buf));
      if (!n.ok() || *n == 0) {
        break;
      }
      output.append(buf, *n);
      if (output.size() > kProbeOutputKeep) {
        output.erase(0, output.size() - kProbeOutputKeep);
      }
    }
  }
  absl::StatusOr<base::ExitStatus> status = qemu->Wait();
  if (absl::StrContains(output, "VFS: Unable to mount root") ||
      absl::StrContains(output, "Kernel panic - not syncing")) {
    return finish(true, "probe boot reached the root-mount panic");
  }
  if (status.ok() && status->signal) {
    return finish(false,
                  absl::StrCat("QEMU crashed during the probe boot, signal ", *status->signal));
  }
  return finish(
      false, absl::StrCat("probe boot failed, QEMU ", status.ok() ? status->ToString() : "lost"));
}

AccelResolverDeps HostAccelResolverDeps(const KvmProbeOptions& o) {
  AccelResolverDeps deps;
  if (const char* env = std::getenv("ABOX_ACCEL")) {  // NOLINT(concurrency-mt-unsafe)
    deps.env_accel = env;
  }
  deps.open_kvm_device = [] {
    base::UniqueFd fd(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
    return fd ? absl::OkStatus() : base::ErrnoError("/dev/kvm");
  };
  deps.key = [o] { return ComputeKvmProbeKey(o); };
  deps.probe = [o] { return ProbeKvm(o); };
  deps.cache_path = o.cache_path;
  return deps;
}

}  // namespace abox::vmm
