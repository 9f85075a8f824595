#include "src/net/tls_client_hello.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "src/net/address_filter.h"
#include "src/net/host_name.h"

namespace abox::net {
namespace {

constexpr uint8_t kContentHandshake = 22;
constexpr uint8_t kHandshakeClientHello = 1;
constexpr size_t kRecordHeader = 5;
constexpr size_t kMaxRecordPayload = 16384;  // 2^14 (RFC 8446 5.1)
constexpr uint16_t kExtServerName = 0;
constexpr uint16_t kExtAlpn = 16;
constexpr uint16_t kExtEncryptedClientHello = 0xfe0d;
constexpr uint8_t kNameTypeHostName = 0;

// Bounds-checked big-endian reader over hostile bytes. Every read fails rather than run past
// the end, and a failed reader stays failed.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}

  bool U8(uint8_t* out) { return Int(1, out); }
  bool U16(uint16_t* out) { return Int(2, out); }
  bool U24(uint32_t* out) { return Int(3, out); }
  bool Bytes(size_t n, absl::string_view* out) {
    if (n > data_.size()) {
      return false;
    }
    *out = data_.substr(0, n);
    data_.remove_prefix(n);
    return true;
  }
  // A vector with a `width`-byte length prefix.
  bool Vector(int width, absl::string_view* out) {
    uint32_t n = 0;
    return Int(width, &n) && Bytes(n, out);
  }
  bool empty() const { return data_.empty(); }

 private:
  template <typename T>
  bool Int(int width, T* out) {
    if (data_.size() < static_cast<size_t>(width)) {
      return false;
    }
    uint32_t v = 0;
    for (int i = 0; i < width; ++i) {
      v = (v << 8) | static_cast<uint8_t>(data_[i]);
    }
    data_.remove_prefix(width);
    *out = static_cast<T>(v);
    return true;
  }

  absl::string_view data_;
};

TlsSniff Result(SniffResult result, std::string reason) {
  TlsSniff sniff;
  sniff.result = result;
  sniff.reason = std::move(reason);
  return sniff;
}

TlsSniff Invalid(absl::string_view reason) {
  return Result(SniffResult::kInvalid, absl::StrCat("malformed TLS ClientHello: ", reason));
}

// server_name extension (RFC 6066 3): exactly one host_name entry, as OpenSSL and BoringSSL
// require; its value must be a DNS name, not an address.
bool ParseServerName(absl::string_view ext, ClientHello* hello, std::string* error) {
  Reader r(ext);
  absl::string_view list;
  uint8_t type = 0;
  absl::string_view name;
  if (!r.Vector(2, &list) || !r.empty() || list.empty()) {
    *error = "server_name extension has a bad list length";
    return false;
  }
  Reader entries(list);
  if (!entries.U8(&type) || !entries.Vector(2, &name) || !entries.empty()) {
    *error = "server_name list must hold exactly one well-formed entry";
    return false;
  }
  if (type != kNameTypeHostName) {
    *error = absl::StrCat("server_name type ", type, " is not host_name");
    return false;
  }
  if (IsIpLiteralHost(name)) {
    *error = absl::StrCat("server name '", QuoteForLog(name),
                          "' is an IP address (RFC 6066 forbids literals)");
    return false;
  }
  auto normalised = NormalizeHostName(name);
  if (!normalised.ok()) {
    *error = absl::StrCat("server name: ", normalised.status().message());
    return false;
  }
  hello->server_name = *std::move(normalised);
  return true;
}

// ALPN extension (RFC 7301 3.1): a non-empty list of non-empty names.
bool ParseAlpn(absl::string_view ext, ClientHello* hello, std::string* error) {
  Reader r(ext);
  absl::string_view list;
  if (!r.Vector(2, &list) || !r.empty() || list.size() < 2) {
    *error = "ALPN extension has a bad list length";
    return false;
  }
  Reader names(list);
  while (!names.empty()) {
    absl::string_view name;
    if (!names.Vector(1, &name) || name.empty()) {
      *error = "ALPN list has an empty or truncated protocol name";
      return false;
    }
    hello->alpn.emplace_back(name);
  }
  return true;
}

// The ClientHello body (RFC 8446 4.1.2; TLS 1.0-1.2 share its layout).
bool ParseBody(absl::string_view body, ClientHello* hello, std::string* error) {
  Reader r(body);
  absl::string_view random, session_id, suites, compression, extensions;
  if (!r.U16(&hello->legacy_version) || !r.Bytes(32, &random)) {
    *error = "truncated version or random";
    return false;
  }
  if ((hello->legacy_version >> 8) != 3) {
    *error = absl::StrCat("client version 0x", absl::Hex(hello->legacy_version), " is not TLS");
    return false;
  }
  if (!r.Vector(1, &session_id) || session_id.size() > 32) {
    *error = "bad session id";
    return false;
  }
  if (!r.Vector(2, &suites) || suites.empty() || suites.size() % 2 != 0) {
    *error = "bad cipher suite list";
    return false;
  }
  if (!r.Vector(1, &compression) || compression.empty()) {
    *error = "bad compression method list";
    return false;
  }
  if (r.empty()) {
    return true;  // No extensions (allowed before TLS 1.3): no SNI.
  }
  if (!r.Vector(2, &extensions) || !r.empty()) {
    *error = "extensions block length does not match the hello";
    return false;
  }
  Reader exts(extensions);
  std::set<uint16_t> seen;
  while (!exts.empty()) {
    uint16_t type = 0;
    absl::string_view data;
    if (!exts.U16(&type) || !exts.Vector(2, &data)) {
      *error = "truncated extension";
      return false;
    }
    // RFC 8446 4.2: at most one extension of each type; two server names would let the proxy
    // and the server disagree about the destination.
    if (!seen.insert(type).second) {
      *error = absl::StrCat("extension ", type, " appears twice");
      return false;
    }
    if (type == kExtServerName && !ParseServerName(data, hello, error)) {
      return false;
    }
    if (type == kExtAlpn && !ParseAlpn(data, hello, error)) {
      return false;
    }
    if (type == kExtEncryptedClientHello) {
      hello->has_ech = true;
    }
  }
  return true;
}

}  // namespace

const TlsSniff& ClientHelloSniffer::Feed(absl::string_view data) {
  if (state_.result != SniffResult::kNeedMore) {
    return state_;
  }
  buffer_.append(data.data(), data.size());
  state_ = Step();
  return state_;
}

TlsSniff ClientHelloSniffer::Step() {
  // Decide "not TLS" from the first bytes alone: content type, then record version major 3
  // with minor 0..4 (SSL 3.0 .. TLS 1.3 record versions seen in the wild).
  if (parsed_ == 0) {
    absl::string_view head = absl::string_view(buffer_).substr(0, 3);
    if (!head.empty() && static_cast<uint8_t>(head[0]) != kContentHandshake) {
      return Result(SniffResult::kNotTls, "first byte is not a TLS handshake record");
    }
    if (head.size() >= 2 && head[1] != 3) {
      return Result(SniffResult::kNotTls, "record version is not 3.x");
    }
    if (head.size() >= 3 && static_cast<uint8_t>(head[2]) > 4) {
      return Result(SniffResult::kNotTls, "record version is not 3.0 to 3.4");
    }
  }
  while (buffer_.size() - parsed_ >= kRecordHeader) {
    absl::string_view header = absl::string_view(buffer_).substr(parsed_, kRecordHeader);
    if (static_cast<uint8_t>(header[0]) != kContentHandshake) {
      return Invalid(absl::StrCat("record type ", static_cast<uint8_t>(header[0]),
                                  " arrived before the hello was complete"));
    }
    if (header[1] != 3 || static_cast<uint8_t>(header[2]) > 4) {
      return Invalid("a continuation record has a bad version");
    }
    size_t length = (static_cast<uint8_t>(header[3]) << 8) | static_cast<uint8_t>(header[4]);
    if (length == 0 || length > kMaxRecordPayload) {
      return Invalid(absl::StrCat("record length ", length, " is not 1 to 2^14"));
    }
    if (parsed_ + kRecordHeader + length > kMaxClientHelloRecordBytes) {
      return Invalid(
          absl::StrCat("hello spans more than ", kMaxClientHelloRecordBytes, " bytes of records"));
    }
    if (buffer_.size() - parsed_ < kRecordHeader + length) {
      return Result(SniffResult::kNeedMore, "");
    }
    handshake_.append(buffer_, parsed_ + kRecordHeader, length);
    parsed_ += kRecordHeader + length;

    if (handshake_.size() < 4) {
      continue;
    }
    if (static_cast<uint8_t>(handshake_[0]) != kHandshakeClientHello) {
      return Invalid(absl::StrCat("first handshake message has type ",
                                  static_cast<uint8_t>(handshake_[0]), ", not ClientHello"));
    }
    size_t body_length = (static_cast<uint8_t>(handshake_[1]) << 16) |
                         (static_cast<uint8_t>(handshake_[2]) << 8) |
                         static_cast<uint8_t>(handshake_[3]);
    if (body_length > kMaxClientHelloLength) {
      return Invalid(
          absl::StrCat("hello length ", body_length, " exceeds ", kMaxClientHelloLength));
    }
    if (handshake_.size() < 4 + body_length) {
      continue;
    }
    // A client sends nothing else in handshake records before the server answers.
    if (handshake_.size() > 4 + body_length) {
      return Invalid("handshake data follows the hello in its last record");
    }
    TlsSniff sniff;
    std::string error;
    if (!ParseBody(absl::string_view(handshake_).substr(4), &sniff.hello, &error)) {
      return Invalid(error);
    }
    sniff.result = SniffResult::kTls;
    sniff.hello.record_bytes = parsed_;
    return sniff;
  }
  return Result(SniffResult::kNeedMore, "");
}

TlsSniff SniffClientHello(absl::string_view bytes) {
  ClientHelloSniffer sniffer;
  return sniffer.Feed(bytes);
}

}  // namespace abox::net
