// TEST ONLY: aboxd over the fake VMM, for the client's and the CLI's tests. The real daemon
// (the one composition root, src/daemon/daemon.h, with aboxd's flags and main loop from
// aboxd_main.h) whose "VMs" are threads of this process serving the real guest agent, so that a
// sandbox's commands run as host processes of this user and its /workspace is a host
// directory. Images: a fake "default" image (consistent manifest, files that say "fake")
// written into $ABOX_HOME/images when there is none; other names are not installed.
//
//   aboxd-fake-vmm [aboxd's flags] [--fail MESSAGE] [--delay-ms N] [--hang] [--ignore-sigterm]
//
// --fail prints MESSAGE to stderr and exits 3 (an aboxd refusing to start); --delay-ms waits
// before starting; --hang never listens; --ignore-sigterm keeps serving after SIGTERM. The VMs
// cannot outlive this process: a stop ends them (unlike aboxd's, which keep running). The
// budget is 8 vCPUs and 8192 MiB unless --max-cpus / --max-memory say (not this host's).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/self_path.h"
#include "src/base/status_macros.h"
#include "src/daemon/aboxd_main.h"
#include "src/image/fs_util.h"
#include "src/image/image_store.h"
#include "src/image/manifest.h"
#include "src/image/sha256.h"
#include "src/proto/frame.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon {
namespace {

constexpr int kExitFail = 3;

// Writes image "default" into the layout unless a bootable one is there: the three files say
// "fake" (the fake VMM boots nothing) and the manifest describes them, as `abox image build`
// would.
absl::Status InstallFakeImage(const base::HostLayout& layout) {
  if (image::OpenImageForBoot(layout, "default", proto::kProtocolVersion).ok()) {
    return absl::OkStatus();
  }
  const std::filesystem::path dir = layout.ImageDir("default");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("mkdir ", dir.string(), ": ", ec.message()));
  }
  image::Manifest m;
  m.name = "default";
  m.created_at = "2024-01-01T00:00:00Z";
  m.kernel_version = "6.1.0-fake";
  m.kernel_cmdline = "console=ttyS0";
  m.protocol_version = proto::kProtocolVersion;
  m.arch = "amd64";
  m.agent_sha256 = image::Sha256Hex("fake agent");
  m.rootfs_key = image::Sha256Hex("fake rootfs key");
  m.inputs = image::Sha256Hex("fake inputs");
  for (const char* file : {image::kRootfsFile, image::kVmlinuxFile, image::kInitramfsFile}) {
    ABOX_RETURN_IF_ERROR(base::WriteFileAtomic((dir / file).string(), "fake\n", 0644));
    ABOX_ASSIGN_OR_RETURN(image::FileStamp st, image::StatFile(dir / file));
    ABOX_ASSIGN_OR_RETURN(std::string sha, image::Sha256File(dir / file));
    m.artifacts[file] = {sha, st.size, st.mtime_ns};
  }
  return base::WriteFileAtomic((dir / image::kManifestFile).string(), image::ManifestToJson(m),
                               0644);
}

int Main(int argc, char** argv) {
  CLI::App app{"aboxd-fake-vmm: TEST ONLY. aboxd over a fake VMM (its VMs run as host processes)"};
  AboxdFlags flags;
  AddAboxdFlags(app, flags);
  std::string fail;
  int delay_ms = 0;
  bool hang = false;
  bool ignore_sigterm = false;
  app.add_option("--fail", fail, "Print MESSAGE to stderr and exit 3");
  app.add_option("--delay-ms", delay_ms, "Wait this long before starting")
      ->check(CLI::Range(0, 600000));
  app.add_flag("--hang", hang, "Never listen");
  app.add_flag("--ignore-sigterm", ignore_sigterm, "Keep serving after SIGTERM");
  CLI11_PARSE(app, argc, argv);
  if (!fail.empty()) {
    std::fprintf(stderr, "%s\n", fail.c_str());
    return kExitFail;
  }
  if (hang) {
    for (;;) {
      ::pause();
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));

  sigset_t stop_signals = PrepareProcess(flags);
  absl::StatusOr<DaemonConfig> config = ConfigFromFlags(flags);
  if (!config.ok()) {
    return FailStart(std::string(config.status().message()));
  }
  if (absl::Status s = InstallFakeImage(config->layout); !s.ok()) {
    return FailStart(absl::StrCat("cannot install the fake image: ", s.message()));
  }
  // The fake VM's "guest" is this host: the workspace tools are the built abox-guest.
  absl::StatusOr<std::string> guest_tool =
      base::FindCompanionBinary("abox-guest", "ABOX_GUEST_BIN");
  if (!guest_tool.ok()) {
    return FailStart(std::string(guest_tool.status().message()));
  }
  SandboxOptions& sandbox = config->sandbox;
  sandbox.guest_tool_path = *guest_tool;
  sandbox.guest_identity = false;  // the fake's guest is this host: never set its clock
  sandbox.boot_timeout = absl::Seconds(10);
  sandbox.attach_timeout = absl::Seconds(5);
  sandbox.reap_interval = absl::Milliseconds(100);
  config->server.stop_grace = std::chrono::milliseconds(2000);
  // The budget of the in-process test daemon unless the flags say: the tests' sandboxes fit on
  // any host (aboxd's default follows this host's cores and memory; these VMs use neither).
  if (flags.max_cpus == 0) {
    config->budget.cpus = 8;
  }
  if (flags.max_memory == 0) {
    config->budget.memory_mib = 8192;
  }
  // No warm pool unless asked (--pool N): the tests' ledgers hold their own sandboxes only.
  if (flags.pool < 0) {
    config->pool.size = 0;
  }
  DaemonDeps deps;
  deps.vmm = std::make_unique<abox::testing::FakeVmm>();
  ServeOptions serve;
  serve.ignore_sigterm = ignore_sigterm;
  // The VMs are threads of this process: end them and their commands before it exits.
  serve.after_shutdown = [] { (void)abox::testing::FakeVmm::KillAll(); };
  return ServeUntilStopped(*std::move(config), std::move(deps), stop_signals, serve);
}

}  // namespace
}  // namespace abox::daemon

int main(int argc, char** argv) { return abox::daemon::Main(argc, argv); }
