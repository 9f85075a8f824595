// Who may talk to abox-mcp over Streamable HTTP, and how its requests are checked before any
// MCP message is read: the loopback-only listen address, the bearer token file, the Host and
// Origin checks against DNS rebinding (a web page whose name resolves to 127.0.0.1 reaches the
// port, but its requests carry its own Host and Origin), the MCP-Protocol-Version header and
// session ids. Pure functions; no I/O but the token file and getrandom.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::mcp {

// Where `abox-mcp --http` listens. Only 127.0.0.1 (the HTTP server binds IPv4 loopback).
struct ListenAddress {
  uint16_t port = 0;  // 0: any free port
};

// "127.0.0.1:PORT" or "localhost:PORT" (PORT 0 picks a free one). kInvalidArgument for any other
// host, saying why: abox-mcp never listens where another machine could reach it.
[[nodiscard]] absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view spec);

// The bearer token: the first line of `token_file` when given (at least 16 bytes), else the one
// kept in `home`/mcp-token, created (0600, 64 random hex digits) when missing. `*path` receives
// the file it came from.
[[nodiscard]] absl::StatusOr<std::string> LoadOrCreateToken(const std::string& token_file,
                                                            const std::filesystem::path& home,
                                                            std::string* path);

// kPermissionDenied unless the Host header names this server: 127.0.0.1:`port` or
// localhost:`port` (any case). A rebinding page sends its own name here.
[[nodiscard]] absl::Status CheckHost(const std::optional<std::string>& host, uint16_t port);

// OK without an Origin (non-browser clients send none) or with a loopback one: http(s)://
// 127.0.0.1, localhost or [::1], any port. kPermissionDenied for any other, "null" included.
[[nodiscard]] absl::Status CheckOrigin(const std::optional<std::string>& origin);

// OK without the header (the version negotiated at initialize holds) or with a revision this
// server speaks; kInvalidArgument naming them otherwise.
[[nodiscard]] absl::Status CheckProtocolVersion(const std::optional<std::string>& header);

// Whether an Accept header admits text/event-stream (no header, */* and text/* do).
[[nodiscard]] bool AcceptsEventStream(const std::optional<std::string>& accept);

// 32 bytes from getrandom as 64 hex digits (visible ASCII, as the spec requires).
[[nodiscard]] absl::StatusOr<std::string> NewSessionId();

}  // namespace abox::mcp
