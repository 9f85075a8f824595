// Recognises a TLS ClientHello at the start of a guest connection and reads the server name
// (SNI) the egress policy decides by, plus the ALPN list for the log.
//
// Trust boundary: every byte comes from the guest. Each length is checked against what is
// left, the hello is bounded (kMaxClientHelloLength) however it is split into records, and the
// sniffer keeps every byte it was fed so the proxy can forward them unchanged once it decides:
// the proxy never terminates TLS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace abox::net {

// Largest ClientHello handshake message accepted (body, without its 4-byte header). Today's
// largest real hellos (post-quantum key shares) are ~2 KiB; two full records leave room while
// bounding what one connection makes the host buffer.
inline constexpr size_t kMaxClientHelloLength = size_t{32} * 1024;
// Most bytes of records read to assemble one hello (a hostile guest can split it into 1-byte
// records, each with a 5-byte header).
inline constexpr size_t kMaxClientHelloRecordBytes = size_t{64} * 1024;

enum class SniffResult : uint8_t {
  kNeedMore,  // a prefix of a ClientHello so far: feed more bytes
  kTls,       // a complete, well-formed ClientHello
  kNotTls,    // the first bytes are not a TLS handshake record: try another protocol
  kInvalid,   // looks like TLS but is malformed, too large or has an unacceptable SNI: refuse
};

struct ClientHello {
  // The SNI host_name, normalised (lowercase, no trailing dot). nullopt: the hello has no
  // server_name extension, which the policy treats as "no name" (refused unless an address
  // rule allows the destination).
  std::optional<std::string> server_name;
  // ALPN protocol names as sent (raw bytes: quote before logging).
  std::vector<std::string> alpn;
  uint16_t legacy_version = 0;
  // The hello carries encrypted_client_hello: server_name is then the ECH public name, not the
  // real destination (the policy decides by what it can see).
  bool has_ech = false;
  // Bytes of the TLS records that carried the hello (a prefix of the input).
  size_t record_bytes = 0;
};

struct TlsSniff {
  SniffResult result = SniffResult::kNeedMore;
  ClientHello hello;   // set when result == kTls
  std::string reason;  // why, when kNotTls or kInvalid
};

// Incremental sniffer for one connection. Work per Feed is proportional to the new bytes.
// Not thread-safe.
class ClientHelloSniffer final {
 public:
  ClientHelloSniffer() = default;
  ClientHelloSniffer(const ClientHelloSniffer&) = delete;
  ClientHelloSniffer& operator=(const ClientHelloSniffer&) = delete;

  // Appends `data` and reports. Once the result is not kNeedMore it is final: later calls
  // return it again and no longer buffer (the proxy forwards directly from then on).
  const TlsSniff& Feed(absl::string_view data);
  // Everything fed until the result became final, to forward unchanged.
  const std::string& bytes() const { return buffer_; }

 private:
  TlsSniff Step();

  std::string buffer_;
  size_t parsed_ = 0;      // bytes of whole records consumed from buffer_
  std::string handshake_;  // handshake bytes assembled from those records
  TlsSniff state_;
};

// One-shot form: sniffs `bytes` as if fed at once.
TlsSniff SniffClientHello(absl::string_view bytes);

}  // namespace abox::net
