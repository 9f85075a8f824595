// A scripted stand-in for QEMU's QMP socket, for unit tests of QmpClient and its users.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "src/base/unique_fd.h"

namespace abox::vmm::testing {

// Serves one QMP connection on a background thread: sends the greeting lines, then for every
// line the client sends, calls the handler and writes back the raw lines it returns (so a test
// can send garbage, events, wrong ids or nothing at all). Thread-safe accessors.
class FakeQmpServer final {
 public:
  // Gets each request (discarded JSON if the client sent garbage); returns lines to send, each
  // written followed by "\r\n" unless it already ends in '\n'.
  using Handler = std::function<std::vector<std::string>(const nlohmann::json& request)>;

  // A greeting line like QEMU 7.2's.
  static std::string Greeting();
  // Replies {"return": {}} echoing the request's id.
  static Handler AlwaysOk();
  // `{"return": <value>, "id": <request id>}`.
  static std::string Reply(const nlohmann::json& request, const nlohmann::json& value);

  // Over a socketpair: the client end is taken with TakeClientFd().
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FakeQmpServer>> Start(
      std::vector<std::string> greeting, Handler handler);
  // Listening on a unix socket at `path`; serves the first connection.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FakeQmpServer>> Listen(
      const std::string& path, std::vector<std::string> greeting, Handler handler);

  FakeQmpServer(const FakeQmpServer&) = delete;
  FakeQmpServer& operator=(const FakeQmpServer&) = delete;
  ~FakeQmpServer();

  base::UniqueFd TakeClientFd() { return std::move(client_); }
  // Requests received so far.
  std::vector<nlohmann::json> requests();
  // Closes the server side of the connection (the client then sees EOF).
  void Hangup();

 private:
  FakeQmpServer(std::vector<std::string> greeting, Handler handler)
      : greeting_(std::move(greeting)), handler_(std::move(handler)) {}
  absl::Status StartThread(base::UniqueFd server, bool listening);
  void Serve(int fd, bool listening);

  std::vector<std::string> greeting_;
  Handler handler_;
  base::UniqueFd client_;
  base::UniqueFd stop_read_;
  base::UniqueFd stop_write_;
  std::mutex mu_;
  std::vector<nlohmann::json> requests_;
  int conn_fd_ = -1;  // the connection being served, for Hangup()
  base::UniqueFd server_;
  std::thread thread_;
};

}  // namespace abox::vmm::testing
