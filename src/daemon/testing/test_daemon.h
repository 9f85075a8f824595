// Test fixture: the whole daemon in-process (SQLite state, manager, HTTP server on a temp unix
// socket) over the fake VMM, whose "VMs" run the real guest agent as threads of the test.
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
#include "src/base/self_path.h"
#include "src/daemon/egress_service.h"
#include "src/daemon/event_bus.h"
#include "src/daemon/handlers/services.h"
#include "src/daemon/http/server.h"
#include "src/daemon/http/testing/http_test_client.h"
#include "src/daemon/http/testing/test_server.h"
#include "src/daemon/ledger.h"
#include "src/daemon/sandbox_manager.h"
#include "src/daemon/timer_queue.h"
#include "src/store/database.h"
#include "src/store/egress_repo.h"
#include "src/store/event_repo.h"
#include "src/store/exec_repo.h"
#include "src/store/migrations.h"
#include "src/store/sandbox_repo.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon::testing {

// One "aboxd": everything a real one has except QEMU. Start() may be called again after
// Shutdown() on the same home (a restart).
class TestDaemon final {
 public:
  explicit TestDaemon(const std::string& home, Budget budget = {8, 8192})
      : home_(home), budget_(budget) {}
  ~TestDaemon() { Shutdown(); }

  void Start(abox::testing::FakeVmmOptions vmm_options = {}) {
    std::filesystem::create_directories(home_ + "/images");
    for (const char* f : {"/images/vmlinux", "/images/initramfs", "/images/rootfs"}) {
      std::ofstream(home_ + f) << "fake";
    }
    image::ImageFiles files;
    files.dir = home_ + "/images";
    files.vmlinux = home_ + "/images/vmlinux";
    files.initramfs = home_ + "/images/initramfs";
    files.rootfs = home_ + "/images/rootfs";
    auto db = store::OpenStateDatabase(home_ + "/state.db");
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    sandboxes_ = std::make_unique<store::SandboxRepo>(*db_);
    execs_ = std::make_unique<store::ExecRepo>(*db_);
    event_repo_ = std::make_unique<store::EventRepo>(*db_);
    events_ = std::make_unique<EventBus>(*event_repo_);
    egress_repo_ = std::make_unique<store::EgressRepo>(*db_);
    auto egress = EgressService::Create(*egress_repo_, *events_, egress_options_);
    ASSERT_TRUE(egress.ok()) << egress.status();
    egress_ = *std::move(egress);
    ledger_ = std::make_unique<Ledger>(budget_);
    timers_ = std::make_unique<TimerQueue>();
    vmm_ = std::make_unique<abox::testing::FakeVmm>(vmm_options);
    ManagerOptions options;
    options.image_files = files;
    options.boot_timeout = absl::Seconds(10);
    options.attach_timeout = absl::Seconds(5);
    options.reap_interval = absl::Milliseconds(100);
    options.exec_attach_deadline = absl::Seconds(2);
    // The fake VM's "guest" is this host: the workspace tools are the built abox-guest.
    auto guest_tool = base::FindCompanionBinary("abox-guest", "ABOX_GUEST_BIN");
    ASSERT_TRUE(guest_tool.ok()) << guest_tool.status();
    options.guest_tool_path = *guest_tool;
    options.guest_tool_deadline = guest_tool_deadline_;
    options.wrap_guest_tools = [this](workspace::GuestTools& real) {
      std::lock_guard lock(guest_tools_mu_);
      return wrap_guest_tools_ ? wrap_guest_tools_(real) : nullptr;
    };
    auto workspaces = WorkspaceService::Create(home_);
    ASSERT_TRUE(workspaces.ok()) << workspaces.status();
    workspaces_ = *std::move(workspaces);
    ASSERT_TRUE(workspaces_->Recover().ok());
    manager_ = std::make_unique<SandboxManager>(
        ManagerDeps{vmm_.get(), sandboxes_.get(), execs_.get(), events_.get(), ledger_.get(),
                    timers_.get(), workspaces_.get(), egress_.get()},
        options);
    services_.manager = manager_.get();
    services_.events = events_.get();
    services_.ledger = ledger_.get();
    services_.timers = timers_.get();
    services_.workspaces = workspaces_.get();
    services_.egress = egress_.get();
    services_.openapi_yaml = "openapi: 3.0.3\n";
    http::Router router;
    ASSERT_TRUE(RegisterRoutes(router, services_).ok());
    routes_ = router.Routes();
    http::ServerOptions server_options;
    server_options.unix_socket_path = home_ + "/run/aboxd.sock";
    server_options.stop_grace = std::chrono::milliseconds(2000);
    server_options.worker_threads = 8;
    auto server = http::Server::Create(server_options, std::move(router));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::Status recovered = manager_->Recover();
    ASSERT_TRUE(recovered.ok()) << recovered;
    ASSERT_TRUE(server_->Start().ok());
  }

  // A daemon stop (or, with detach=false, a crash that leaves nothing orderly behind is not
  // possible in-process; the VMs stay up either way, as with a real aboxd).
  void Shutdown() {
    if (server_) {
      server_->Stop();
    }
    if (manager_) {
      manager_->DetachAll();
    }
    if (timers_) {
      timers_->Stop();
    }
    server_.reset();
    manager_.reset();
    workspaces_.reset();
    egress_.reset();
    timers_.reset();
    vmm_.reset();
    events_.reset();
    egress_repo_.reset();
    event_repo_.reset();
    execs_.reset();
    sandboxes_.reset();
    db_.reset();
  }

  std::unique_ptr<http::httptest::HttpTestClient> Connect() {
    auto c = http::httptest::HttpTestClient::ConnectUnix(server_->socket_path());
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

  SandboxManager& manager() { return *manager_; }
  store::SandboxRepo& sandboxes() { return *sandboxes_; }
  store::ExecRepo& execs() { return *execs_; }
  Ledger& ledger() { return *ledger_; }
  WorkspaceService& workspaces() { return *workspaces_; }
  EgressService& egress() { return *egress_; }
  EventBus& events() { return *events_; }
  // Stands in for the workspace tools from the next workspace operation on (a hostile guest;
  // see ManagerOptions::wrap_guest_tools); null: the real ones again.
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
  abox::testing::FakeVmm& vmm() { return *vmm_; }
  const std::vector<std::pair<std::string, std::string>>& routes() const { return routes_; }
  const std::string& socket_path() const { return server_->socket_path(); }

 private:
  std::string home_;
  Budget budget_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<store::SandboxRepo> sandboxes_;
  std::unique_ptr<store::ExecRepo> execs_;
  std::unique_ptr<store::EventRepo> event_repo_;
  std::unique_ptr<EventBus> events_;
  std::unique_ptr<Ledger> ledger_;
  std::unique_ptr<TimerQueue> timers_;
  std::unique_ptr<abox::testing::FakeVmm> vmm_;
  std::unique_ptr<WorkspaceService> workspaces_;
  EgressServiceOptions egress_options_;
  std::unique_ptr<store::EgressRepo> egress_repo_;
  std::unique_ptr<EgressService> egress_;
  std::unique_ptr<SandboxManager> manager_;
  Services services_;
  std::unique_ptr<http::Server> server_;
  std::vector<std::pair<std::string, std::string>> routes_;
  runtime::GuestToolDeadline guest_tool_deadline_;
  std::mutex guest_tools_mu_;
  std::function<std::unique_ptr<workspace::GuestTools>(workspace::GuestTools&)> wrap_guest_tools_;
};

}  // namespace abox::daemon::testing
