// Test fixture: the whole daemon in-process, built by the same composition root as aboxd's main
// (src/daemon/daemon.h) with two boundaries swapped: the fake VMM, whose "VMs" run the real
// guest agent as processes of the test, and (optionally) a fake clock.
#pragma once

#include <poll.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "gtest/gtest.h"
#include "src/api/sandbox.h"
#include "src/base/clock.h"
#include "src/base/self_path.h"
#include "src/daemon/daemon.h"
#include "src/http/testing/http_test_client.h"
#include "src/http/testing/test_server.h"
#include "src/secrets/file_store.h"
#include "src/store/database.h"
#include "src/store/migrations.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon::testing {

// One "aboxd": everything a real one has except QEMU. Start() may be called again after
// Shutdown() on the same home (a restart).
class TestDaemon final {
 public:
  explicit TestDaemon(const std::string& home, Budget budget = {8, 32768})
      : home_(home), budget_(budget) {}
  ~TestDaemon() { Shutdown(); }

  void Start(abox::testing::FakeVmmOptions vmm_options = {}) {
    std::filesystem::create_directories(home_ + "/images");
    for (const char* f : {"/images/vmlinux", "/images/initramfs", "/images/rootfs"}) {
      std::ofstream(home_ + f) << "fake";
    }
    DaemonConfig config;
    config.layout.home = home_;
    config.layout.cache_dir = home_ + "/cache";
    config.server.unix_socket_path = home_ + "/run/aboxd.sock";
    config.server.stop_grace = std::chrono::milliseconds(2000);
    config.server.worker_threads = 8;
    config.budget = budget_;
    config.egress = egress_options_;
    config.openapi_yaml = "openapi: 3.0.3\n";
    config.pool = pool_options_;
    if (pool_options_.size > 0) {
      config.pool_shapes = {PoolShape{.image = "default",
                                      .cpus = 1,
                                      .memory_mib = static_cast<int>(api::kDefaultMemoryMib),
                                      .disk_mib = api::kDefaultDiskMib}};
    }
    SandboxOptions& options = config.sandbox;
    image::ImageFiles files;
    files.dir = home_ + "/images";
    files.vmlinux = home_ + "/images/vmlinux";
    files.initramfs = home_ + "/images/initramfs";
    files.rootfs = home_ + "/images/rootfs";
    options.image_files = files;
    options.boot_timeout = absl::Seconds(10);
    options.attach_timeout = absl::Seconds(5);
    options.reap_interval = absl::Milliseconds(100);
    options.exec_attach_deadline = absl::Seconds(2);
    // The fake VM's "guest" is this host: the workspace tools are the built abox-guest.
    auto guest_tool = base::FindCompanionBinary("abox-guest", "ABOX_GUEST_BIN");
    ASSERT_TRUE(guest_tool.ok()) << guest_tool.status();
    options.guest_tool_path = *guest_tool;
    options.guest_identity = false;  // the fake's guest is this host: never set its clock
    options.guest_tool_deadline = guest_tool_deadline_;
    options.wrap_guest_tools = [this](workspace::GuestTools& real) {
      std::lock_guard lock(guest_tools_mu_);
      return wrap_guest_tools_ ? wrap_guest_tools_(real) : nullptr;
    };
    auto vmm = std::make_unique<abox::testing::FakeVmm>(vmm_options);
    vmm_ = vmm.get();
    // Never the person's keyring: a file store in the test home.
    auto secret_values = [home = home_]() -> absl::StatusOr<secrets::DefaultValueStore> {
      absl::StatusOr<std::unique_ptr<secrets::FileValueStore>> store =
          secrets::FileValueStore::Open(home + "/secrets");
      if (!store.ok()) {
        return store.status();
      }
      return secrets::DefaultValueStore{.store = *std::move(store)};
    };
    auto daemon = Daemon::Create(
        std::move(config),
        {.vmm = std::move(vmm), .clock = clock_, .secret_values = std::move(secret_values)});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    if (create_injector_) {
      daemon_->sandboxes().set_create_injector(create_injector_);
    }
    absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  // A daemon stop: the VMs stay up, as with a real aboxd.
  void Shutdown() {
    if (daemon_) {
      daemon_->Shutdown();
    }
    daemon_.reset();
    vmm_ = nullptr;
  }

  std::unique_ptr<http::httptest::HttpTestClient> Connect() {
    auto c = http::httptest::HttpTestClient::ConnectUnix(daemon_->server().socket_path());
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Like the real client: a keep-alive connection the server closed while it sat idle
  // (request_head_timeout) is replaced before the next request, never retried after one.
  void ReconnectIfClosed(std::unique_ptr<http::httptest::HttpTestClient>& client) {
    pollfd idle{client ? client->fd() : -1, POLLIN, 0};
    if (!client || ::poll(&idle, 1, 0) == 1) {
      client = Connect();
    }
  }

  Daemon& daemon() { return *daemon_; }
  store::SandboxRepo& sandboxes() { return daemon_->sandbox_repo(); }
  store::ExecRepo& execs() { return daemon_->exec_repo(); }
  Ledger& ledger() { return daemon_->ledger(); }
  WorkspaceService& workspaces() { return daemon_->workspaces(); }
  EgressService& egress() { return daemon_->egress(); }
  EventBus& events() { return daemon_->events(); }
  // Stands in for the workspace tools from the next workspace operation on (a hostile guest;
  // see SandboxOptions::wrap_guest_tools); null: the real ones again.
  void set_guest_tools_wrapper(
      std::function<std::unique_ptr<workspace::GuestTools>(workspace::GuestTools&)> wrap) {
    std::lock_guard lock(guest_tools_mu_);
    wrap_guest_tools_ = std::move(wrap);
  }
  // The guest tools' deadline from the next Start() on.
  void set_guest_tool_deadline(runtime::GuestToolDeadline deadline) {
    guest_tool_deadline_ = deadline;
  }
  // Egress settings of the next Start() (e.g. a test resolver override).
  void set_egress_options(EgressServiceOptions options) { egress_options_ = std::move(options); }
  // A warm pool from the next Start() on (keeping the default image and size from the start).
  void set_pool(PoolOptions options) { pool_options_ = options; }
  // The clock of the next Start() (null: the system clock); must outlive the daemon.
  void set_clock(base::Clock* clock) { clock_ = clock; }
  // Fails create steps from the next Start() on (see SandboxService::set_create_injector).
  void set_create_injector(Pipeline::Injector injector) {
    create_injector_ = std::move(injector);
    if (daemon_) {
      daemon_->sandboxes().set_create_injector(create_injector_);
    }
  }
  abox::testing::FakeVmm& vmm() { return *vmm_; }
  const std::vector<std::pair<std::string, std::string>>& routes() const {
    return daemon_->routes();
  }
  const std::string& socket_path() const { return daemon_->server().socket_path(); }

 private:
  std::string home_;
  Budget budget_;
  std::unique_ptr<Daemon> daemon_;
  abox::testing::FakeVmm* vmm_ = nullptr;  // owned by daemon_
  EgressServiceOptions egress_options_;
  PoolOptions pool_options_;
  base::Clock* clock_ = nullptr;
  Pipeline::Injector create_injector_;
  runtime::GuestToolDeadline guest_tool_deadline_;
  std::mutex guest_tools_mu_;
  std::function<std::unique_ptr<workspace::GuestTools>(workspace::GuestTools&)> wrap_guest_tools_;
};

}  // namespace abox::daemon::testing
