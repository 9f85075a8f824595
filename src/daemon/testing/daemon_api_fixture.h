// Test fixture for the API end to end in-process: real HTTP server, real SQLite, real guest
// agent; only the VM is fake (tests/testing/fake_vmm.h). Used by daemon_api_test.cc (sandboxes,
// execs, restarts, events) and exec_output_api_test.cc (readers, disconnects, the output log).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/daemon/testing/daemon_test_base.h"
#include "src/daemon/testing/test_daemon.h"
#include "src/http/testing/http_test_client.h"
#include "src/http/testing/test_server.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon::testing {

// The daemon (budget_: 8 vCPUs, 8 GiB unless a subclass changes it) on a fresh home, and a
// keep-alive client.
class DaemonApiTest : public DaemonTestBase {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<TestDaemon>(dir_.path(), budget_);
    StartAndConnect();
  }

  std::string CreateSandbox(absl::string_view body = "{}") {
    http::httptest::Response r = Call("POST", "/v1/sandboxes", body);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", "");
  }

  std::string StartExec(const std::string& sandbox, const nlohmann::json& body) {
    http::httptest::Response r =
        Call("POST", absl::StrCat("/v1/sandboxes/", sandbox, "/execs"), body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", "");
  }

  // The whole NDJSON output stream of an exec (on a fresh connection).
  std::vector<nlohmann::json> ReadOutput(const std::string& sandbox, const std::string& exec) {
    auto c = daemon_->Connect();
    absl::StatusOr<http::httptest::Response> r =
        c->Request("GET", absl::StrCat("/v1/sandboxes/", sandbox, "/execs/", exec, "/output"));
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<nlohmann::json> lines;
    if (r.ok()) {
      EXPECT_EQ(r->status, 200);
      for (absl::string_view line : absl::StrSplit(r->body, '\n', absl::SkipEmpty())) {
        lines.push_back(nlohmann::json::parse(line));
      }
    }
    return lines;
  }

  static std::string Joined(const std::vector<nlohmann::json>& lines, const char* stream) {
    std::string out;
    for (const auto& l : lines) {
      if (l.value("type", "") == "output" && l.value("stream", "") == stream) {
        if (l.contains("data")) {
          out += l["data"].get<std::string>();
        } else {
          std::string raw;
          absl::Base64Unescape(l["data_b64"].get<std::string>(), &raw);
          out += raw;
        }
      }
    }
    return out;
  }

  nlohmann::json Wait(const std::string& sandbox, const std::string& exec) {
    http::httptest::Response r =
        Call("GET", absl::StrCat("/v1/sandboxes/", sandbox, "/execs/", exec, "/wait"));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json();
  }

  http::httptest::TempDir dir_;
  Budget budget_{8, 8192};
};

}  // namespace abox::daemon::testing
