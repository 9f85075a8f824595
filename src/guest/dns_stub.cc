#include "src/guest/dns_stub.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"

namespace abox::guest {
namespace {

using proto::FrameType;

constexpr size_t kDnsHeader = 12;

uint16_t GetU16(absl::string_view s, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(s[at]) << 8) |
                               static_cast<uint8_t>(s[at + 1]));
}

void PutU16(uint16_t v, std::string* out) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v & 0xff));
}

}  // namespace

std::optional<std::string> DnsErrorReply(absl::string_view query, uint8_t rcode) {
  if (query.size() < kDnsHeader) {
    return std::nullopt;
  }
  uint16_t flags = GetU16(query, 2);
  if ((flags & 0x8000) != 0 || GetU16(query, 4) != 1) {
    return std::nullopt;  // a response, or not exactly one question
  }
  // Walk the question's name: plain labels only (queries carry no compression pointers).
  size_t at = kDnsHeader;
  for (;;) {
    if (at >= query.size()) {
      return std::nullopt;
    }
    uint8_t len = static_cast<uint8_t>(query[at]);
    if (len == 0) {
      ++at;
      break;
    }
    if ((len & 0xc0) != 0 || at - kDnsHeader + len + 1 > 255) {
      return std::nullopt;
    }
    at += 1 + len;
  }
  if (at + 4 > query.size()) {
    return std::nullopt;  // no QTYPE / QCLASS
  }
  std::string reply;
  reply.append(query.data(), 2);  // ID
  // QR=1, the query's opcode and RD, RA=1, the rcode.
  PutU16(static_cast<uint16_t>(0x8000 | (flags & 0x7900) | 0x0080 | (rcode & 0x0f)), &reply);
  PutU16(1, &reply);  // QDCOUNT
  PutU16(0, &reply);  // ANCOUNT
  PutU16(0, &reply);  // NSCOUNT
  PutU16(0, &reply);  // ARCOUNT
  reply.append(query.data() + kDnsHeader, at + 4 - kDnsHeader);
  return reply;
}

DnsQueryTunnel::DnsQueryTunnel(uint32_t id, int udp_fd, const sockaddr_storage& client,
                               socklen_t client_len, std::string query, uint32_t send_window,
                               Clock::time_point deadline, FrameSink& sink)
    : GuestTunnel(id),
      udp_fd_(udp_fd),
      client_(client),
      client_len_(client_len),
      query_(std::move(query)),
      deadline_(deadline),
      send_(send_window),
      recv_(proto::kDefaultWindow) {
  SendTunnelOpen(id, {.kind = proto::TunnelKind::kDns}, sink);
  std::string framed;
  PutU16(static_cast<uint16_t>(query_.size()), &framed);
  framed += query_;
  // The hub only opens query tunnels when the window takes kMaxDnsQuery + 2 bytes.
  send_.Consume(static_cast<uint32_t>(framed.size()));
  sink.Send(FrameType::kTunnelData, id, proto::kFlagEof, framed);
}

std::optional<Clock::time_point> DnsQueryTunnel::Deadline() const {
  return done_ ? std::nullopt : std::optional<Clock::time_point>(deadline_);
}

void DnsQueryTunnel::OnTimer(Clock::time_point now, FrameSink& sink) {
  if (done_ || now < deadline_) {
    return;
  }
  sink.Send(FrameType::kReset, id(), 0, proto::EncodeError("no DNS answer in time"));
  if (!answered_) {
    ReplyError(kDnsServFail);
  }
  done_ = true;
}

absl::Status DnsQueryTunnel::OnData(absl::string_view data, bool eof, FrameSink& sink) {
  if (host_eof_) {
    return absl::InvalidArgumentError(absl::StrCat("tunnel_data on stream ", id(), " after EOF"));
  }
  ABOX_RETURN_IF_ERROR(base::Annotate(recv_.OnReceived(static_cast<uint32_t>(data.size())),
                                      absl::StrCat("tunnel_data on stream ", id())));
  host_eof_ = eof;
  // Bytes are copied out at once, so their credit goes straight back.
  if (uint32_t credit = recv_.Release(static_cast<uint32_t>(data.size())); credit > 0) {
    sink.Send(FrameType::kCredit, id(), 0, proto::EncodeCredit(credit));
  }
  if (done_) {
    return absl::OkStatus();
  }
  if (!answered_) {
    // Only the first framed answer matters; anything after it is dropped.
    size_t room = 2 + kMaxDnsAnswer - answer_.size();
    answer_.append(data.data(), std::min(room, data.size()));
    if (answer_.size() >= 2) {
      size_t len = GetU16(answer_, 0);
      if (answer_.size() >= 2 + len) {
        Reply(absl::string_view(answer_).substr(2, len));
        answered_ = true;
        answer_.clear();
      }
    }
  }
  if (host_eof_) {
    if (!answered_) {
      ReplyError(kDnsServFail);  // The host closed without a (complete) answer.
    }
    done_ = true;  // Our EOF went with the query: both halves are closed.
  }
  return absl::OkStatus();
}

absl::Status DnsQueryTunnel::OnCredit(uint32_t bytes) {
  return base::Annotate(send_.Grant(bytes), absl::StrCat("credit on tunnel ", id()));
}

void DnsQueryTunnel::OnReset(absl::string_view error) {
  (void)error;
  if (!done_ && !answered_) {
    ReplyError(kDnsRefused);
  }
  done_ = true;
}

void DnsQueryTunnel::Abort() {
  if (!done_ && !answered_) {
    ReplyError(kDnsRefused);
  }
  done_ = true;
}

void DnsQueryTunnel::Reply(absl::string_view answer) {
  ssize_t n;
  do {
    n = ::sendto(udp_fd_, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                 reinterpret_cast<const sockaddr*>(&client_), client_len_);
  } while (n < 0 && errno == EINTR);
  // A full socket buffer or a client that left: the answer is lost, as UDP may lose it.
}

void DnsQueryTunnel::ReplyError(uint8_t rcode) {
  if (std::optional<std::string> reply = DnsErrorReply(query_, rcode)) {
    Reply(*reply);
  }
}

}  // namespace abox::guest
