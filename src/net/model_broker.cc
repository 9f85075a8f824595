#include "src/net/model_broker.h"

#include <poll.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/net/fd_stream.h"
#include "src/net/model_broker_filter.h"
#include "src/net/stream_splice.h"

namespace abox::net {
namespace {

constexpr size_t kReadChunk = size_t{16} * 1024;
// How often the first-head wait looks at the cancel fd (the tunnel's Read does not watch it).
constexpr absl::Duration kCancelPoll = absl::Milliseconds(200);

bool Cancelled(int cancel_fd) {
  if (cancel_fd < 0) {
    return false;
  }
  pollfd p{cancel_fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

// Sends the broker's own answer and ends the guest's side (the guest may read it at leisure).
void Answer(TunnelStream& guest, const std::string& reply) {
  if (guest.Write(reply).ok()) {
    guest.CloseWrite();
  } else {
    guest.Reset("could not answer the guest");
  }
}

// The first request head, through the filter: its rewritten bytes (and any body bytes read
// with it) in `*first_up`. False when the connection is done (answered, closed or timed out).
bool ReadFirstRequest(TunnelStream& guest, ModelBrokerFilter& filter,
                      const ModelBrokerConfig& config, int cancel_fd, std::string* first_up,
                      ModelBrokerOutcome* out) {
  absl::Time deadline = absl::Now() + config.head_timeout;
  std::string buf(kReadChunk, '\0');
  while (filter.requests() == 0) {
    if (Cancelled(cancel_fd)) {
      out->ended_early = "broker shutting down";
      guest.Reset(out->ended_early);
      return false;
    }
    absl::StatusOr<size_t> n =
        guest.Read(buf.data(), buf.size(), std::min(deadline, absl::Now() + kCancelPoll));
    if (!n.ok()) {
      if (absl::IsDeadlineExceeded(n.status()) && absl::Now() < deadline) {
        continue;
      }
      if (absl::IsDeadlineExceeded(n.status())) {
        out->ended_early = absl::StrCat("no complete request head within ",
                                        absl::FormatDuration(config.head_timeout));
        ModelReply reply;
        reply.status = 408;
        reply.message = out->ended_early;
        Answer(guest, BuildModelErrorReply(std::nullopt, reply, false));
        return false;
      }
      out->ended_early = absl::StrCat("guest: ", n.status().message());
      guest.Reset(out->ended_early);
      return false;
    }
    if (*n == 0) {
      out->ended_early = "the guest closed before a complete request";
      guest.CloseWrite();
      return false;
    }
    absl::Status fed = filter.FeedUp(absl::string_view(buf.data(), *n), first_up);
    if (!fed.ok()) {
      out->ended_early = std::string(fed.message());
      Answer(guest, filter.RefusalReply(fed));
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status ValidateModelBrokerConfig(const ModelBrokerConfig& config) {
  if (config.token.size() < 32) {
    return absl::InvalidArgumentError(
        "the model broker token must be at least 32 characters (make it with a CSPRNG)");
  }
  if (!config.upstream || !config.key || !config.connect) {
    return absl::InvalidArgumentError(
        "the model broker needs an upstream, a key source and a connect function");
  }
  return absl::OkStatus();
}

ModelBrokerOutcome ServeModelBroker(TunnelStream& guest, const ModelBrokerConfig& config,
                                    int cancel_fd) {
  ModelBrokerOutcome out;
  if (absl::Status valid = ValidateModelBrokerConfig(config); !valid.ok()) {
    out.ended_early = std::string(valid.message());
    ModelReply reply;
    reply.status = 503;
    reply.message = out.ended_early;
    Answer(guest, BuildModelErrorReply(std::nullopt, reply, false));
    return out;
  }
  ModelBrokerFilter filter(config);
  std::string first_up;
  if (!ReadFirstRequest(guest, filter, config, cancel_fd, &first_up, &out)) {
    return out;
  }
  ModelUpstream up = *filter.upstream();
  out.api = up.api;
  out.requests = filter.requests();
  auto fail = [&](const absl::Status& why) {
    out.ended_early = absl::StrCat("cannot reach ", up.Authority(), ": ", why.message());
    Answer(guest, filter.FailUpstream(502, out.ended_early));
    return out;
  };

  absl::Time deadline = absl::Now() + config.connect_timeout;
  absl::StatusOr<UpstreamConnection> connection =
      config.connect(up.host, up.port, deadline, cancel_fd);
  if (!connection.ok()) {
    return fail(connection.status());
  }
  absl::StatusOr<std::unique_ptr<FdStream>> socket =
      FdStream::Create(std::move(connection->fd),
                       {.info = {}, .write_timeout = config.idle_timeout, .cancel_fd = cancel_fd});
  if (!socket.ok()) {
    return fail(socket.status());
  }
  TunnelStream* upstream = socket->get();
  std::unique_ptr<TlsStream> tls;
  if (up.tls) {
    if (config.trust == nullptr) {
      (*socket)->Reset("no trust store");
      return fail(absl::FailedPreconditionError("no trust store is configured for https"));
    }
    absl::StatusOr<std::unique_ptr<TlsStream>> client =
        TlsStream::Client(**socket, *config.trust, up.host, deadline);
    if (!client.ok()) {
      (*socket)->Reset("upstream TLS failed");
      return fail(client.status());
    }
    tls = *std::move(client);
    upstream = tls.get();
  }
  out.connected = true;
  if (absl::Status sent = upstream->Write(first_up); !sent.ok()) {
    upstream->Reset("write failed");
    return fail(sent);
  }

  ModelBrokerFilter* f = &filter;
  StreamSpliceOptions options;
  options.idle_timeout = config.idle_timeout;
  options.filter_up = [f](absl::string_view in, std::string* o) { return f->FeedUp(in, o); };
  options.refusal_reply = [f](const absl::Status& why) { return f->RefusalReply(why); };
  options.filter_down = [f](absl::string_view in, std::string* o) { return f->FeedDown(in, o); };
  options.finish_down = [f](std::string* o) { return f->FinishDown(o); };
  options.guest_eof_aborts = true;
  out.splice = SpliceStreams(guest, *upstream, options);
  out.requests = filter.requests();
  filter.Finish(out.splice.ended);
  return out;
}

}  // namespace abox::net
