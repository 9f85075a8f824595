#include "src/mcp/http_guard.h"

#include <sys/random.h>

#include <array>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/mcp/server.h"

namespace abox::mcp {
namespace {

constexpr size_t kMinTokenBytes = 16;

std::string Hex(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 0xf]);
  }
  return out;
}

absl::StatusOr<std::string> RandomHex(size_t bytes) {
  std::array<unsigned char, 64> buf{};
  if (bytes > buf.size()) {
    return absl::InvalidArgumentError("too many random bytes asked for");
  }
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return base::ErrnoError("getrandom");
    }
    got += static_cast<size_t>(n);
  }
  return Hex(buf.data(), bytes);
}

// Splits "host[:port]" ("[::1]:port" for IPv6); the port is "" when absent.
void SplitHostPort(absl::string_view in, absl::string_view* host, absl::string_view* port) {
  *port = "";
  if (absl::StartsWith(in, "[")) {
    size_t close = in.find(']');
    if (close == absl::string_view::npos) {
      *host = in;
      return;
    }
    *host = in.substr(0, close + 1);
    absl::string_view rest = in.substr(close + 1);
    if (absl::ConsumePrefix(&rest, ":")) {
      *port = rest;
    } else if (!rest.empty()) {
      *host = in;  // junk after ']': never a loopback name
    }
    return;
  }
  size_t colon = in.rfind(':');
  if (colon == absl::string_view::npos) {
    *host = in;
    return;
  }
  *host = in.substr(0, colon);
  *port = in.substr(colon + 1);
}

bool IsPort(absl::string_view s) {
  uint32_t port = 0;
  return !s.empty() && s.size() <= 5 && absl::SimpleAtoi(s, &port) && port <= 65535 &&
         absl::ascii_isdigit(static_cast<unsigned char>(s.front()));
}

}  // namespace

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view spec) {
  absl::string_view host;
  absl::string_view port;
  SplitHostPort(spec, &host, &port);
  uint32_t number = 0;
  if (port.empty() || !IsPort(port) || !absl::SimpleAtoi(port, &number)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http wants 127.0.0.1:PORT (PORT 0 picks a free one), not \"", spec, "\""));
  }
  if (host != "127.0.0.1" && !absl::EqualsIgnoreCase(host, "localhost")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http ", spec,
                     ": abox-mcp listens only on the loopback address 127.0.0.1 (anyone who "
                     "reaches the port could run commands in your sandboxes); use 127.0.0.1:",
                     number));
  }
  return ListenAddress{static_cast<uint16_t>(number)};
}

absl::StatusOr<std::string> LoadOrCreateToken(const std::string& token_file,
                                              const std::filesystem::path& home,
                                              std::string* path) {
  if (!token_file.empty()) {
    *path = token_file;
    absl::StatusOr<std::string> data = base::ReadFile(token_file, 4096);
    if (!data.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read the token file ", token_file, ": ", data.status().message()));
    }
    std::string token(absl::StripAsciiWhitespace(*data));
    if (token.size() < kMinTokenBytes || token.find_first_of(" \t\r\n") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("the token in ", token_file,
                       " must be one word of at least 16 bytes: use a long random one (e.g. "
                       "openssl rand -hex 32)"));
    }
    return token;
  }
  *path = (home / "mcp-token").string();
  if (absl::StatusOr<std::string> existing = base::ReadFile(*path, 4096); existing.ok()) {
    std::string token(absl::StripAsciiWhitespace(*existing));
    if (token.size() >= kMinTokenBytes) {
      return token;
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(home, ec);
  ABOX_ASSIGN_OR_RETURN(std::string token, RandomHex(32));
  ABOX_RETURN_IF_ERROR(base::WriteFileAtomic(*path, token + "\n", 0600));
  return token;
}

absl::Status CheckHost(const std::optional<std::string>& host, uint16_t port) {
  if (!host.has_value()) {
    return absl::PermissionDeniedError(
        absl::StrCat("the request has no Host header; send Host: 127.0.0.1:", port));
  }
  absl::string_view name;
  absl::string_view given_port;
  SplitHostPort(*host, &name, &given_port);
  bool loopback = name == "127.0.0.1" || absl::EqualsIgnoreCase(name, "localhost");
  bool same_port = given_port.empty() ? port == 80 : given_port == absl::StrCat(port);
  if (!loopback || !same_port) {
    return absl::PermissionDeniedError(absl::StrCat(
        "Host \"", *host, "\" is not this server (127.0.0.1:", port,
        "): refused against DNS rebinding; connect to http://127.0.0.1:", port, "/mcp"));
  }
  return absl::OkStatus();
}

absl::Status CheckOrigin(const std::optional<std::string>& origin) {
  if (!origin.has_value()) {
    return absl::OkStatus();
  }
  absl::string_view rest = *origin;
  if (!absl::ConsumePrefix(&rest, "http://") && !absl::ConsumePrefix(&rest, "https://")) {
    rest = "";
  }
  absl::string_view host;
  absl::string_view port;
  SplitHostPort(rest, &host, &port);
  bool loopback =
      host == "127.0.0.1" || host == "[::1]" || absl::EqualsIgnoreCase(host, "localhost");
  if (!loopback || (!port.empty() && !IsPort(port)) || rest.find('/') != absl::string_view::npos) {
    return absl::PermissionDeniedError(absl::StrCat(
        "Origin \"", *origin, "\" is not a loopback origin: a web page may not drive abox-mcp"));
  }
  return absl::OkStatus();
}

absl::Status CheckProtocolVersion(const std::optional<std::string>& header) {
  if (!header.has_value()) {
    return absl::OkStatus();
  }
  for (const char* supported : kProtocolVersions) {
    if (*header == supported) {
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported MCP-Protocol-Version \"", *header,
                                                 "\"; this server speaks ",
                                                 absl::StrJoin(kProtocolVersions, ", ")));
}

bool AcceptsEventStream(const std::optional<std::string>& accept) {
  if (!accept.has_value()) {
    return true;
  }
  std::string lower = absl::AsciiStrToLower(*accept);
  return absl::StrContains(lower, "text/event-stream") || absl::StrContains(lower, "*/*") ||
         absl::StrContains(lower, "text/*");
}

absl::StatusOr<std::string> NewSessionId() { return RandomHex(32); }

}  // namespace abox::mcp
