// Test helpers: a per-test temporary directory and a started Server on a socket inside it.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "src/http/server.h"
#include "src/http/testing/http_test_client.h"

namespace abox::http::httptest {

// A fresh directory under /tmp, removed with everything in it at the end of the test.
class TempDir final {
 public:
  TempDir() {
    std::string tmpl = "/tmp/abox-http-test-XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Options for a test server with a socket in `dir` and short timeouts.
inline ServerOptions TestOptions(const TempDir& dir) {
  ServerOptions options;
  options.unix_socket_path = dir.path() + "/run/aboxd.sock";
  options.stop_grace = std::chrono::milliseconds(2000);
  return options;
}

// Creates and starts a server; fails the test (returns null) on error.
inline std::unique_ptr<Server> StartServer(ServerOptions options, Router router) {
  absl::StatusOr<std::unique_ptr<Server>> server =
      Server::Create(std::move(options), std::move(router));
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) {
    return nullptr;
  }
  absl::Status started = (*server)->Start();
  EXPECT_TRUE(started.ok()) << started;
  return *std::move(server);
}

// Connects to the server's unix socket; fails the test (returns null) on error.
inline std::unique_ptr<HttpTestClient> ConnectTo(const Server& server) {
  absl::StatusOr<std::unique_ptr<HttpTestClient>> client =
      HttpTestClient::ConnectUnix(server.socket_path());
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

}  // namespace abox::http::httptest
