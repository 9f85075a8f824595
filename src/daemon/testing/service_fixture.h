// Test fixture for one service at a time: the daemon's services built by the composition root
// over the fake VMM and a temp SQLite, called directly (no HTTP in between).
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "src/daemon/testing/daemon_test_base.h"
#include "src/http/testing/test_server.h"

namespace abox::daemon::testing {

class ServiceTest : public DaemonTestBase {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<TestDaemon>(home_.path(), Budget{16, 16384});
    StartAndConnect();
  }
  Daemon& d() { return daemon_->daemon(); }

  // A ready sandbox (through SandboxService, waiting); its id.
  std::string Ready(api::SandboxCreate request = {}) {
    absl::StatusOr<SandboxView> view = d().sandboxes().CreateAndWait(request);
    EXPECT_TRUE(view.ok()) << view.status();
    return view.ok() ? view->record.id : "";
  }
  // Waits until the exec ended; its record.
  store::ExecRecord Ended(const std::shared_ptr<LiveExec>& exec) {
    exec->Join();
    absl::StatusOr<store::ExecRecord> record = d().exec_repo().Get(exec->id());
    EXPECT_TRUE(record.ok()) << record.status();
    return record.ok() ? *record : store::ExecRecord{};
  }
  // Polls `done` for up to 10 s.
  template <typename Fn>
  static bool Eventually(Fn done) {
    for (int i = 0; i < 1000; ++i) {
      if (done()) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
  }

  http::httptest::TempDir home_;
};

}  // namespace abox::daemon::testing
