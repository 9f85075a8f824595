// A client for QEMU's machine protocol (QMP) on a unix socket.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "src/base/unique_fd.h"

namespace abox::vmm {

// Owns one QMP connection: reads the greeting, negotiates capabilities, then runs commands one
// at a time. Asynchronous events that arrive meanwhile are kept (bounded) for TakeEvents().
//
// Trust boundary: QEMU's bytes are untrusted (a guest that took over QEMU controls them). Every
// read is bounded in size (max_message_bytes per message) and in time (a deadline per call);
// every message is parsed without exceptions and type-checked; replies must carry the id of
// the command they answer (late replies to a timed-out command are skipped). After a protocol
// error the connection is unusable and every later call fails.
//
// Not thread-safe: one caller at a time.
class QmpClient final {
 public:
  struct Options {
    size_t max_message_bytes = 1 << 20;
    size_t max_pending_events = 256;
  };

  // Connects to the socket at `path` and completes the handshake within `timeout`.
  [[nodiscard]] static absl::StatusOr<QmpClient> Connect(const std::string& path,
                                                         std::chrono::milliseconds timeout,
                                                         Options options);
  [[nodiscard]] static absl::StatusOr<QmpClient> Connect(const std::string& path,
                                                         std::chrono::milliseconds timeout) {
    return Connect(path, timeout, Options());
  }
  // Same, over an already connected stream socket (tests use a socketpair).
  [[nodiscard]] static absl::StatusOr<QmpClient> Create(base::UniqueFd fd,
                                                        std::chrono::milliseconds timeout,
                                                        Options options);

  QmpClient(QmpClient&&) = default;
  QmpClient& operator=(QmpClient&&) = default;
  QmpClient(const QmpClient&) = delete;
  QmpClient& operator=(const QmpClient&) = delete;
  ~QmpClient() = default;

  // Runs `command` with `arguments` (an object, or null for none) and returns its "return"
  // value. A QMP error reply becomes a status (CommandNotFound -> kUnimplemented,
  // DeviceNotFound -> kNotFound, others -> kFailedPrecondition) quoting QEMU's description;
  // kDeadlineExceeded when no reply came within `timeout`; kUnavailable when QEMU closed the
  // connection.
  [[nodiscard]] absl::StatusOr<nlohmann::json> Execute(const std::string& command,
                                                       const nlohmann::json& arguments,
                                                       std::chrono::milliseconds timeout);

  // Passes `fd` (still owned by the caller) to QEMU under `name` with "getfd" (SCM_RIGHTS),
  // for commands that take "fd:<name>" (migrate, migrate-incoming).
  [[nodiscard]] absl::Status SendFd(const std::string& name, int fd,
                                    std::chrono::milliseconds timeout);

  // Sends "quit" and treats the connection closing before a reply as success (QEMU may exit
  // before it answers).
  [[nodiscard]] absl::Status Quit(std::chrono::milliseconds timeout);

  // Events received so far (each an object with "event", "data", "timestamp"), oldest first.
  [[nodiscard]] std::deque<nlohmann::json> TakeEvents();
  // Events dropped because more than max_pending_events were pending.
  [[nodiscard]] uint64_t dropped_events() const { return dropped_events_; }
  // The greeting's "QMP" object (version, capabilities).
  [[nodiscard]] const nlohmann::json& greeting() const { return greeting_; }

 private:
  QmpClient(base::UniqueFd fd, Options options) : fd_(std::move(fd)), options_(options) {}

  absl::Status Handshake(std::chrono::steady_clock::time_point deadline);
  // Reads the next message (a JSON object) before `deadline`.
  absl::StatusOr<nlohmann::json> ReadMessage(std::chrono::steady_clock::time_point deadline);
  absl::StatusOr<nlohmann::json> Run(const std::string& command, const nlohmann::json& arguments,
                                     std::chrono::milliseconds timeout, int pass_fd);
  // Writes one command line; `pass_fd` >= 0 goes along with its first bytes (SCM_RIGHTS).
  absl::Status WriteLine(const std::string& line, std::chrono::steady_clock::time_point deadline,
                         int pass_fd);
  // Records the first protocol error; the connection is unusable afterwards.
  absl::Status Fail(absl::Status status);
  void KeepEvent(nlohmann::json event);

  base::UniqueFd fd_;
  Options options_;
  std::string buffer_;
  nlohmann::json greeting_;
  std::deque<nlohmann::json> events_;
  uint64_t dropped_events_ = 0;
  uint64_t next_id_ = 1;
  absl::Status broken_;
};

}  // namespace abox::vmm
