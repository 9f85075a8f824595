// Internal: state shared by Server and its connections (includes Boost; not for handlers).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "boost/asio/thread_pool.hpp"
#include "src/http/response_state.h"
#include "src/http/router.h"
#include "src/http/server.h"

namespace abox::http::internal {

class Connection;

// Outlives every connection and acceptor: `io` is the last member, so it is destroyed first,
// together with the connections its pending handlers still hold, while the rest is intact.
class ServerCore final {
 public:
  enum class Admission { kAdmitted, kFull, kStopping };

  ServerCore(ServerOptions options, Router router, uid_t allowed_uid)
      : options(std::move(options)), router(std::move(router)), allowed_uid(allowed_uid) {}
  ServerCore(const ServerCore&) = delete;
  ServerCore& operator=(const ServerCore&) = delete;

  // Adds `connection` unless the server is stopping. At max_connections it makes room by
  // taking out the connection that has waited longest for a request head (returned in
  // `evicted`, for the caller to close); with none waiting it is kFull. Thread-safe.
  Admission Register(const std::shared_ptr<Connection>& connection,
                     std::shared_ptr<Connection>* evicted);
  // Idempotent; wakes WaitForNoConnections. Thread-safe.
  void Unregister(const Connection* connection);
  // Refuses connections from now on.
  void BeginStop();
  [[nodiscard]] std::vector<std::shared_ptr<Connection>> Connections() const;
  [[nodiscard]] size_t connection_count() const;
  // Whether every connection closed within `timeout`.
  bool WaitForNoConnections(std::chrono::milliseconds timeout);

  const ServerOptions options;
  const Router router;
  const uid_t allowed_uid;
  const std::shared_ptr<LoopGuard> loop = std::make_shared<LoopGuard>();
  std::unique_ptr<boost::asio::thread_pool> workers;  // Start() creates, Stop() joins

 private:
  mutable std::mutex mu_;
  std::condition_variable idle_;
  std::unordered_map<const Connection*, std::weak_ptr<Connection>> connections_;
  bool stopping_ = false;

 public:
  boost::asio::io_context io;  // last: see the class comment
};

}  // namespace abox::http::internal
