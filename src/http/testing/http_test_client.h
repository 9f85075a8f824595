// A small blocking HTTP/1.1 client for tests: plain sockets with a receive timeout (a broken
// server fails the test instead of hanging it) and Beast's parser for the responses.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/base/unique_fd.h"

namespace abox::http::httptest {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Response {
  int status = 0;
  Headers headers;
  std::string body;  // chunked bodies joined
  bool keep_alive = false;
  bool chunked = false;

  // The first header `name` (case-insensitive).
  [[nodiscard]] std::optional<std::string> Header(absl::string_view name) const;
  // The body parsed as JSON (discarded value when it is not JSON).
  [[nodiscard]] nlohmann::json Json() const;
};

// Not thread-safe; one connection.
class HttpTestClient final {
 public:
  static absl::StatusOr<std::unique_ptr<HttpTestClient>> ConnectUnix(const std::string& path);
  static absl::StatusOr<std::unique_ptr<HttpTestClient>> ConnectTcp(uint16_t port);

  // Sends a request and reads its whole response.
  absl::StatusOr<Response> Request(absl::string_view method, absl::string_view target,
                                   absl::string_view body = "", const Headers& headers = {});
  // Sends a request (with Content-Length unless `headers` says otherwise) without reading.
  absl::Status Send(absl::string_view method, absl::string_view target, absl::string_view body,
                    const Headers& headers = {});
  // Reads one whole response.
  absl::StatusOr<Response> ReadResponse();
  // Reads a response's header only (for streams); later bytes stay for ReadUntil().
  absl::StatusOr<Response> ReadHeader();
  // Reads raw bytes until `needle` has been seen; returns everything read so far (and keeps it).
  absl::StatusOr<std::string> ReadUntil(absl::string_view needle);
  // Writes raw bytes.
  absl::Status WriteRaw(absl::string_view bytes);
  // Reads until EOF; returns the bytes (kDeadlineExceeded if the server keeps it open).
  absl::StatusOr<std::string> ReadToEof();
  // Whether the server closed the connection (EOF or reset) without sending anything more.
  bool ServerClosed();

  void Close() { fd_.reset(); }
  [[nodiscard]] int fd() const { return fd_.get(); }

 private:
  explicit HttpTestClient(base::UniqueFd fd) : fd_(std::move(fd)) {}
  // One read() into pending_; 0 on EOF.
  absl::StatusOr<size_t> Fill();

  base::UniqueFd fd_;
  std::string pending_;  // bytes received and not yet consumed
};

// The receive timeout of every client (no test waits longer for a byte).
inline constexpr std::chrono::seconds kClientTimeout{20};

}  // namespace abox::http::httptest
