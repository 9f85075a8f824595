// The fixture of the abox binary's tests against the real daemon over a fake VMM
// (aboxd-fake-vmm, src/daemon/testing), which abox starts on demand in a scratch home: secrets
// go to the 0600 file store (never the person's keyring), and the daemon is stopped at the end.
// The test target defines ABOX_CLI_BIN and ABOXD_FAKE_VMM (src/cli/CMakeLists.txt).
#pragma once

#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "src/http/testing/test_server.h"
#include "tests/testing/abox_runner.h"

namespace abox::testing {

class CliDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ::setenv("ABOX_BIN", ABOX_CLI_BIN, 1);  // NOLINT(concurrency-mt-unsafe): before any thread
  }
  ~CliDaemonTest() override { Abox({"daemon", "stop"}); }

  AboxResult Abox(std::vector<std::string> args, std::string stdin_data = "",
                  const std::map<std::string, std::string>& extra_env = {}) {
    AboxCall call;
    call.args = std::move(args);
    call.stdin_data = std::move(stdin_data);
    call.env = env_;
    call.env.insert(extra_env.begin(), extra_env.end());
    call.timeout_seconds = 60;
    return RunAbox(call);
  }

  http::httptest::TempDir dir_;
  std::map<std::string, std::string> env_ = {
      {"ABOX_HOME", dir_.path() + "/home"},
      {"ABOX_CACHE_DIR", dir_.path() + "/cache"},
      {"ABOX_SOCKET", dir_.path() + "/run/aboxd.sock"},
      {"ABOXD_BIN", ABOXD_FAKE_VMM},
      {"ABOX_NO_AUTOSTART", ""},
      {"ABOX_SECRET_STORE", "file"},
      {"XDG_CONFIG_HOME", dir_.path() + "/config"},
  };
};

}  // namespace abox::testing
