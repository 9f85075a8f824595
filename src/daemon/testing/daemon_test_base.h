// What every in-process daemon test fixture shares: a TestDaemon (daemon_), one keep-alive
// client (client_), Call() on it, and a teardown that ends every fake VM the test left.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "src/daemon/testing/test_daemon.h"
#include "src/http/testing/http_test_client.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon::testing {

class DaemonTestBase : public ::testing::Test {
 protected:
  void TearDown() override {
    client_.reset();
    daemon_.reset();
    (void)abox::testing::FakeVmm::KillAll();
  }

  // Starts daemon_ (made and configured by the fixture) and connects client_.
  void StartAndConnect() {
    daemon_->Start();
    client_ = daemon_->Connect();
    ASSERT_NE(client_, nullptr);
  }

  // One request on client_ (reconnected if the server closed it while idle); a transport
  // failure fails the test and returns an empty response.
  http::httptest::Response Call(absl::string_view method, absl::string_view target,
                                absl::string_view body = "") {
    daemon_->ReconnectIfClosed(client_);
    absl::StatusOr<http::httptest::Response> r = client_->Request(method, target, body);
    EXPECT_TRUE(r.ok()) << method << " " << target << ": " << r.status();
    return r.ok() ? *r : http::httptest::Response{};
  }

  std::unique_ptr<TestDaemon> daemon_;
  std::unique_ptr<http::httptest::HttpTestClient> client_;
};

}  // namespace abox::daemon::testing
