// JSON-RPC 2.0 as MCP's stdio transport carries it: one message per line, UTF-8, no batches.
// Parsing never throws (nlohmann::json with exceptions off) and never trusts the client: a line
// that is not a JSON-RPC message becomes an error to answer, never a crash.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace abox::mcp {

// JSON-RPC error codes (https://www.jsonrpc.org/specification#error_object).
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

// The longest line read as a message; a longer one is answered with kInvalidRequest.
inline constexpr size_t kMaxLineBytes = size_t{4} << 20;

// One message from the client.
struct Incoming {
  enum class Kind { kRequest, kNotification, kResponse };
  Kind kind = Kind::kNotification;
  nlohmann::json id;  // kRequest / kResponse: a string or an integer
  std::string method;
  nlohmann::json params;  // an object, or null when absent
  // kResponse: the answer to a request of ours; exactly one is set (not null), as sent.
  nlohmann::json result;
  nlohmann::json error;
};

// Why a line is not a message, and the answer it gets (`id` null when it could not be read).
struct Malformed {
  int code = kInvalidRequest;
  std::string message;
  nlohmann::json id;
};

// Parses one line (without its newline). Exactly one of the two is set.
struct ParsedLine {
  std::optional<Incoming> message;
  std::optional<Malformed> error;
};
[[nodiscard]] ParsedLine ParseLine(absl::string_view line);

// {"jsonrpc":"2.0","id":id,"result":result}.
[[nodiscard]] nlohmann::json ResultMessage(const nlohmann::json& id, nlohmann::json result);
// {"jsonrpc":"2.0","id":id,"error":{"code":code,"message":message}}.
[[nodiscard]] nlohmann::json ErrorMessage(const nlohmann::json& id, int code,
                                          absl::string_view message);
// {"jsonrpc":"2.0","method":method,"params":params}.
[[nodiscard]] nlohmann::json NotificationMessage(absl::string_view method, nlohmann::json params);

// `message` as one line (no newline inside: JSON escapes them), with invalid UTF-8 replaced.
[[nodiscard]] std::string SerializeLine(const nlohmann::json& message);

// Splits bytes read from a descriptor into lines of at most `max_line` bytes. A longer line is
// dropped as it arrives (memory stays bounded) and reported once, as too_long.
class LineReader final {
 public:
  struct Line {
    std::string text;
    bool too_long = false;
  };
  explicit LineReader(int fd, size_t max_line = kMaxLineBytes) : fd_(fd), max_line_(max_line) {}

  // The next line; nullopt at end of input (or when reading fails).
  [[nodiscard]] std::optional<Line> Next();

 private:
  int fd_;
  size_t max_line_;
  std::string buffer_;
  size_t scanned_ = 0;  // bytes of buffer_ known to hold no newline
  bool discarding_ = false;
  bool eof_ = false;
};

}  // namespace abox::mcp
