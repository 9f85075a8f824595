#include "src/cli/doctor.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/api/sandbox.h"
#include "src/api/wire.h"
#include "src/base/host_layout.h"
#include "src/cli/doctor_check.h"
#include "src/cli/doctor_checks.h"
#include "src/cli/terminal_text.h"
#include "src/client/answers.h"
#include "src/client/daemon_launcher.h"
#include "src/client/http_connection.h"
#include "src/image/image_store.h"
#include "src/vmm/host_tsc.h"

namespace abox::cli {
namespace {

// The VM a sandbox runs in now: its id, or "<id>.<n>" after a checkpoint restore (QEMU's
// `-name abox-<vm id>` says which).
std::string VmIdOf(const HostView& host, const api::Sandbox& s) {
  absl::StatusOr<std::string> cmdline = host.Read(absl::StrCat("/proc/", s.vmm_pid, "/cmdline"));
  if (s.vmm_pid <= 0 || !cmdline.ok()) {
    return s.id;
  }
  std::vector<std::string> argv = absl::StrSplit(*cmdline, '\0');
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "-name" && absl::StartsWith(argv[i + 1], absl::StrCat("abox-", s.id, "."))) {
      return argv[i + 1].substr(5);
    }
  }
  return s.id;
}

constexpr char kDoctorFooter[] =
    R"(Checks: host (KVM, QEMU and its seccomp, user namespaces, cgroups, disk space under
$ABOX_HOME), daemon (socket and its directory, $ABOX_HOME and state file modes, TCP listener on
loopback only), images (manifests verify), each running sandbox's QEMU as /proc shows it: its
jail (a uid of its own, no two QEMUs sharing one; its own namespaces; a root that is not the
host's; limits on core dumps, open files and processes), Seccomp, NoNewPrivs, capabilities,
cgroup, environment, descriptors, and no network device in its argv nor as QEMU reports it over
QMP; egress (each sandbox's mode) and secrets. Then the residual risks that hold on this host.

doctor only observes: it does not start aboxd (the daemon checks say when it is not running),
runs nothing in a sandbox and writes no file. Without --quick it hashes every image and, when
no verdict is cached, runs abox's KVM probe boot (a few seconds).

Exit status: 0 when no check failed (warnings included), 1 when any failed.
)";

// The KVM verdict abox's probe cached for the default image's kernel, else (unless quick) a
// probe boot now, not cached: doctor writes nothing.
std::optional<vmm::KvmVerdict> KvmVerdict(const base::HostLayout& layout, bool quick) {
  vmm::KvmProbeOptions probe;
  probe.kernel = (layout.ImageDir("default") / "vmlinux").string();
  probe.cache_path = (layout.home / "cache" / "kvm-probe.json").string();
  absl::StatusOr<vmm::KvmProbeKey> key = vmm::ComputeKvmProbeKey(probe);
  if (!key.ok()) {
    return std::nullopt;  // no default image yet: nothing to probe with
  }
  if (std::optional<vmm::KvmVerdict> cached = vmm::LookupKvmVerdict(probe.cache_path, *key)) {
    return cached;
  }
  if (quick) {
    return std::nullopt;
  }
  if (absl::StatusOr<uint64_t> khz = vmm::HostTscKhz(); khz.ok()) {
    probe.tsc_khz = *khz;  // as QemuVmm probes
  }
  return vmm::ProbeKvm(probe);
}

std::vector<Check> ImageChecks(const base::HostLayout& layout, bool quick) {
  std::vector<Check> out;
  absl::StatusOr<std::vector<image::ListedImage>> images = image::ListImages(layout);
  if (!images.ok()) {
    out.push_back({"images", "images", CheckStatus::kFail,
                   absl::StrCat("cannot list images: ", images.status().message()), ""});
    return out;
  }
  if (images->empty()) {
    out.push_back({"images", "images", CheckStatus::kWarn,
                   absl::StrCat("no image in ", layout.ImagesDir().string()), "abox image build"});
  }
  for (const image::ListedImage& i : *images) {
    std::string name = absl::StrCat("images.", i.name);
    if (!i.manifest.ok()) {
      out.push_back({"images", name, CheckStatus::kFail,
                     absl::StrCat(i.name, ": ", i.manifest.status().message()),
                     image::BuildCommandFor(i.name, true)});
    } else if (quick) {
      out.push_back({"images", name, CheckStatus::kInfo,
                     absl::StrCat(i.name, ": manifest reads; artifacts not hashed (--quick)"), ""});
    } else if (absl::Status s = image::VerifyImage(layout, i.name); !s.ok()) {
      out.push_back({"images", name, CheckStatus::kFail, absl::StrCat(i.name, ": ", s.message()),
                     image::BuildCommandFor(i.name, true)});
    } else {
      out.push_back({"images", name, CheckStatus::kPass,
                     absl::StrCat(i.name, ": every artifact matches its manifest's sha256"), ""});
    }
  }
  return out;
}

// Health and the running sandboxes, from aboxd if it runs; never starts it.
DaemonFacts AskDaemon(const std::string& socket, const std::string& home,
                      std::vector<api::Sandbox>* sandboxes) {
  DaemonFacts facts{.socket_path = socket, .home = home};
  absl::StatusOr<std::unique_ptr<client::ApiClient>> api = client::ApiClient::Create(socket);
  if (!api.ok()) {
    facts.error = api.status();
    return facts;
  }
  (*api)->set_timeout(absl::Seconds(10));
  absl::StatusOr<api::Health> health = client::CheckHealth(**api);
  if (!health.ok()) {
    facts.error = health.status();
    facts.not_running = client::IsNothingListening(health.status());
    return facts;
  }
  facts.health = *health;
  absl::StatusOr<client::ApiResponse> listed = (*api)->Get("/v1/sandboxes");
  absl::StatusOr<std::vector<api::Sandbox>> decoded =
      listed.ok() ? client::DecodeAnswer(*listed, "GET /v1/sandboxes", api::DecodeSandboxList)
                  : absl::StatusOr<std::vector<api::Sandbox>>(listed.status());
  if (decoded.ok()) {
    *sandboxes = *std::move(decoded);
  } else {
    facts.error = decoded.status();
  }
  return facts;
}

}  // namespace

DoctorReport RunDoctor(const DoctorOptions& options) {
  DoctorReport report;
  HostView host = RealHostView();
  absl::StatusOr<base::HostLayout> layout = base::ResolveHostLayout();
  absl::StatusOr<std::filesystem::path> socket = base::ResolveSocketPath();
  if (!layout.ok() || !socket.ok()) {
    report.checks.push_back(
        {"host", "host.layout", CheckStatus::kFail,
         std::string((layout.ok() ? socket.status() : layout.status()).message()),
         "set ABOX_HOME / ABOX_SOCKET to absolute paths"});
    return report;
  }

  HostCheckOptions host_options;
  host_options.home = layout->home.string();
  if (const char* accel = std::getenv("ABOX_ACCEL")) {  // NOLINT(concurrency-mt-unsafe)
    host_options.env_accel = accel;
  }
  host_options.kvm_verdict = [&] { return KvmVerdict(*layout, options.quick); };
  report.checks = HostChecks(host, host_options);

  std::vector<api::Sandbox> sandboxes;
  DaemonFacts facts = AskDaemon(socket->string(), layout->home.string(), &sandboxes);
  for (Check& c : DaemonChecks(host, facts)) {
    report.checks.push_back(std::move(c));
  }

  for (Check& c : ImageChecks(*layout, options.quick)) {
    report.checks.push_back(std::move(c));
  }

  std::vector<InspectedSandbox> inspected;
  for (const api::Sandbox& s : sandboxes) {
    if (s.state != "ready") {
      continue;
    }
    SandboxFacts sf{
        .id = s.id,
        .name = s.name,
        .vmm_pid = s.vmm_pid,
        .run_dir = host.Canonical(layout->SandboxRunDir(VmIdOf(host, s)).string()),
        .image_dirs = {layout->ImagesDir().string(), host.Canonical(layout->ImagesDir().string()),
                       host.Canonical(layout->ImageDir(s.image).string())},
        .egress_mode = s.egress_mode};
    // The frozen disks a restored VM stands on: its golden template's, its checkpoint's.
    for (const char* frozen : {"templates", "checkpoints"}) {
      sf.image_dirs.push_back(host.Canonical((layout->home / frozen).string()));
    }
    std::vector<Check> checks = SandboxChecks(host, sf);
    inspected.push_back({std::move(sf), std::move(checks)});
  }
  FailSharedVmUids(inspected);
  for (InspectedSandbox& s : inspected) {
    for (Check& c : s.checks) {
      report.checks.push_back(std::move(c));
    }
  }
  if (facts.health && !facts.error.ok()) {
    report.checks.push_back({"sandbox", "sandbox.list", CheckStatus::kFail,
                             absl::StrCat("aboxd answers but its sandboxes could not be listed: ",
                                          facts.error.message()),
                             "`abox ls` says more"});
  } else if (facts.health && inspected.empty()) {
    report.checks.push_back(
        {"sandbox", "sandbox.none", CheckStatus::kInfo, "no running sandbox to inspect", ""});
  } else if (!facts.health) {
    report.checks.push_back(
        {"sandbox", "sandbox.none", CheckStatus::kInfo, "not checked: aboxd is not running", ""});
  }
  report.checks.push_back(
      {"egress", "egress.canary", CheckStatus::kInfo,
       "no canary lookup: it would need a command in a sandbox, and doctor only observes; "
       "`abox exec ID -- getent hosts denied.example` should fail",
       ""});
  report.checks.push_back(SecretFileCheck(host, facts.home));
  report.checks.push_back(CaKeyCheck(host, facts.home));
  report.risks = ResidualRisks(report.checks, host.euid);
  return report;
}

void AddDoctorCommand(CLI::App& app, Action* action) {
  auto options = std::make_shared<DoctorOptions>();
  auto* cmd = app.add_subcommand(
      "doctor",
      "Check the host, aboxd, images and each running sandbox's confinement; list the residual "
      "risks");
  cmd->add_flag("--json", options->json,
                "Print {\"checks\": [...], \"risks\": [...], \"summary\": {pass, warn, fail, "
                "info}}");
  cmd->add_flag("--quick", options->quick,
                "Skip the slow checks (image hashes, a KVM probe boot when none is cached)");
  cmd->footer(kDoctorFooter);
  cmd->callback([options, action] {
    *action = [options] {
      DoctorReport report = RunDoctor(*options);
      if (options->json) {
        std::printf("%s\n", JsonForTerminal(stdout, api::Dump(DoctorJson(report), 2)).c_str());
      } else {
        std::printf("%s", ForTerminal(stdout, DoctorText(report)).c_str());
      }
      return DoctorExitCode(report);
    };
  });
}

}  // namespace abox::cli
