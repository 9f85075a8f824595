#include "src/http/server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/strand.hpp"
#include "spdlog/spdlog.h"
#include "src/base/status_macros.h"
#include "src/http/auth.h"
#include "src/http/connection.h"
#include "src/http/listen_socket.h"
#include "src/http/server_core.h"

namespace abox::http {
namespace internal {

ServerCore::Admission ServerCore::Register(const std::shared_ptr<Connection>& connection,
                                           std::shared_ptr<Connection>* evicted) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) {
    return Admission::kStopping;
  }
  if (connections_.size() >= options.max_connections) {
    // A connection that has not sent a request head costs its client nothing to keep open; a
    // crowd of them must not lock the user's CLI out. The one waiting longest makes room.
    std::shared_ptr<Connection> oldest;
    int64_t oldest_since = 0;
    for (const auto& [key, weak] : connections_) {
      std::shared_ptr<Connection> candidate = weak.lock();
      std::optional<int64_t> since = candidate ? candidate->AwaitingRequestSince() : std::nullopt;
      if (since.has_value() && (oldest == nullptr || *since < oldest_since)) {
        oldest = std::move(candidate);
        oldest_since = *since;
      }
    }
    if (oldest == nullptr) {
      return Admission::kFull;
    }
    connections_.erase(oldest.get());
    *evicted = std::move(oldest);
  }
  connections_.emplace(connection.get(), connection);
  return Admission::kAdmitted;
}

void ServerCore::Unregister(const Connection* connection) {
  std::lock_guard<std::mutex> lock(mu_);
  if (connections_.erase(connection) > 0 && connections_.empty()) {
    idle_.notify_all();
  }
}

void ServerCore::BeginStop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
}

std::vector<std::shared_ptr<Connection>> ServerCore::Connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Connection>> out;
  for (const auto& [key, weak] : connections_) {
    if (std::shared_ptr<Connection> connection = weak.lock()) {
      out.push_back(std::move(connection));
    }
  }
  return out;
}

size_t ServerCore::connection_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connections_.size();
}

bool ServerCore::WaitForNoConnections(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_.wait_for(lock, timeout, [this] { return connections_.empty(); });
}

namespace {

namespace net = boost::asio;
using ErrorCode = boost::system::error_code;
using Protocol = net::generic::stream_protocol;

// Accepts on one listening socket with accept4(SOCK_CLOEXEC) (Asio's accept does not set
// close-on-exec, and aboxd forks QEMU) and admits or refuses each peer. Runs on its strand.
class Acceptor final : public std::enable_shared_from_this<Acceptor> {
 public:
  Acceptor(ServerCore& core, Transport transport)
      : core_(core),
        transport_(transport),
        listener_(net::make_strand(core.io)),
        retry_timer_(listener_.get_executor()) {}

  absl::Status Assign(base::UniqueFd fd) {
    ErrorCode ec;
    listener_.assign(Protocol(transport_ == Transport::kUnix ? AF_UNIX : AF_INET, 0), fd.get(), ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("adopting the listening socket: ", ec.message()));
    }
    (void)fd.release();  // the Asio socket owns it now
    return absl::OkStatus();
  }

  void Start() {
    net::post(listener_.get_executor(), [self = shared_from_this()] { self->Wait(); });
  }

  void Close() {
    net::post(listener_.get_executor(), [self = shared_from_this()] {
      ErrorCode ignored;
      self->retry_timer_.cancel();
      self->listener_.close(ignored);
    });
  }

 private:
  void Wait() {
    listener_.async_wait(net::socket_base::wait_read,
                         [self = shared_from_this()](ErrorCode ec) { self->OnReadable(ec); });
  }

  void OnReadable(ErrorCode ec) {
    if (ec || !listener_.is_open()) {
      return;  // closed by Stop()
    }
    for (;;) {
      int fd = ::accept4(listener_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        Admit(base::UniqueFd(fd));
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED) {
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        break;
      }
      // EMFILE and friends: wait a little instead of spinning on a readable listener.
      spdlog::error("{}: accept failed: {}; retrying shortly", core_.options.name,
                    base::ErrnoError("accept4").ToString());
      retry_timer_.expires_after(std::chrono::milliseconds(100));
      retry_timer_.async_wait([self = shared_from_this()](ErrorCode ec) {
        if (!ec) {
          self->Wait();
        }
      });
      return;
    }
    Wait();
  }

  void Admit(base::UniqueFd fd) {
    Peer peer{transport_, std::nullopt, std::nullopt};
    if (transport_ == Transport::kUnix) {
      absl::StatusOr<PeerCredentials> cred = GetPeerCredentials(fd.get());
      if (!cred.ok()) {
        spdlog::warn("{}: refused a connection: {}", core_.options.name, cred.status().ToString());
        return;
      }
      if (absl::Status allowed = CheckPeerUid(*cred, core_.allowed_uid); !allowed.ok()) {
        spdlog::warn("{}: {}", core_.options.name, std::string(allowed.message()));
        return;  // closed without reading a byte
      }
      peer.pid = cred->pid;
      peer.uid = cred->uid;
    } else {
      int one = 1;  // responses and stream chunks go out at once
      (void)::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    Connection::Socket socket(net::make_strand(core_.io));
    ErrorCode ec;
    socket.assign(Protocol(transport_ == Transport::kUnix ? AF_UNIX : AF_INET, 0), fd.get(), ec);
    if (ec) {
      spdlog::error("{}: cannot adopt a connection: {}", core_.options.name, ec.message());
      return;
    }
    (void)fd.release();
    auto connection = std::make_shared<Connection>(core_, std::move(socket), peer);
    std::shared_ptr<Connection> evicted;
    switch (core_.Register(connection, &evicted)) {
      case ServerCore::Admission::kAdmitted:
        if (evicted != nullptr) {
          spdlog::debug("{}: {} connections open; closing the longest idle one", core_.options.name,
                        core_.options.max_connections);
          evicted->ForceClose("idle while a new client needed its slot");
        }
        connection->Start();
        break;
      case ServerCore::Admission::kFull:
        spdlog::warn("{}: {} connections open; refusing another", core_.options.name,
                     core_.options.max_connections);
        connection->RejectBusy();
        break;
      case ServerCore::Admission::kStopping:
        connection->ForceClose("server stopped");
        break;
    }
  }

  ServerCore& core_;
  const Transport transport_;
  Protocol::socket listener_;
  net::steady_timer retry_timer_;
};

}  // namespace
}  // namespace internal

class Server::Impl {
 public:
  std::unique_ptr<internal::ServerCore> core;
  UnixListenSocket unix_socket;
  uint16_t tcp_port = 0;
  std::vector<std::shared_ptr<internal::Acceptor>> acceptors;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  bool started = false;
  bool stopped = false;
};

namespace {

absl::Status CheckOptions(const ServerOptions& options) {
  if (options.unix_socket_path.empty() && !options.tcp_port.has_value()) {
    return absl::InvalidArgumentError("the server needs a unix socket path or a TCP port");
  }
  if (options.tcp_without_token) {
    if (!options.tcp_bearer_token.empty()) {
      return absl::InvalidArgumentError("tcp_without_token with a bearer token: choose one");
    }
  } else if (options.tcp_port.has_value() && options.tcp_bearer_token.size() < 16) {
    return absl::InvalidArgumentError(
        "a TCP listener needs a bearer token of at least 16 bytes (e.g. 32 random hex digits)");
  }
  if (options.io_threads < 1 || options.worker_threads < 1 || options.max_connections < 1 ||
      options.max_body_bytes < 1 || options.request_head_timeout.count() < 1) {
    return absl::InvalidArgumentError(
        "io_threads, worker_threads, max_connections, max_body_bytes and request_head_timeout "
        "must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Create(ServerOptions options, Router router) {
  ABOX_RETURN_IF_ERROR(CheckOptions(options));
  std::optional<UnixSocketLock> lock;
  if (!options.unix_socket_path.empty()) {
    ABOX_ASSIGN_OR_RETURN(lock, LockUnixSocket(options.unix_socket_path));
  }
  return Listen(std::move(options), std::move(router), std::move(lock));
}

absl::StatusOr<std::unique_ptr<Server>> Server::Create(ServerOptions options, Router router,
                                                       UnixSocketLock lock) {
  ABOX_RETURN_IF_ERROR(CheckOptions(options));
  std::error_code ec;
  if (options.unix_socket_path.empty() ||
      std::filesystem::absolute(options.unix_socket_path, ec).string() != lock.path) {
    return absl::InvalidArgumentError(absl::StrCat("internal: the lock of ", lock.path,
                                                   " is not the lock of the socket \"",
                                                   options.unix_socket_path, "\""));
  }
  return Listen(std::move(options), std::move(router), std::move(lock));
}

absl::StatusOr<std::unique_ptr<Server>> Server::Listen(ServerOptions options, Router router,
                                                       std::optional<UnixSocketLock> lock) {
  auto impl = std::make_unique<Impl>();
  if (lock.has_value()) {
    ABOX_ASSIGN_OR_RETURN(impl->unix_socket, ListenUnix(*std::move(lock), /*backlog=*/128));
  }
  absl::Cleanup remove_socket = [&impl] { RemoveUnixSocketFile(impl->unix_socket); };
  base::UniqueFd tcp_fd;
  if (options.tcp_port.has_value()) {
    ABOX_ASSIGN_OR_RETURN(tcp_fd, ListenLoopback(*options.tcp_port, 128, &impl->tcp_port));
  }
  uid_t allowed_uid = options.allowed_uid.value_or(::geteuid());
  impl->core =
      std::make_unique<internal::ServerCore>(std::move(options), std::move(router), allowed_uid);

  if (impl->unix_socket.fd) {
    auto unix_acceptor = std::make_shared<internal::Acceptor>(*impl->core, Transport::kUnix);
    ABOX_RETURN_IF_ERROR(unix_acceptor->Assign(std::move(impl->unix_socket.fd)));
    impl->acceptors.push_back(std::move(unix_acceptor));
  }
  if (tcp_fd) {
    auto tcp_acceptor = std::make_shared<internal::Acceptor>(*impl->core, Transport::kTcp);
    ABOX_RETURN_IF_ERROR(tcp_acceptor->Assign(std::move(tcp_fd)));
    impl->acceptors.push_back(std::move(tcp_acceptor));
  }
  std::move(remove_socket).Cancel();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

absl::Status Server::Start() {
  if (impl_->started || impl_->stopped) {
    return absl::FailedPreconditionError("the server was already started");
  }
  impl_->started = true;
  internal::ServerCore& core = *impl_->core;
  core.workers = std::make_unique<boost::asio::thread_pool>(core.options.worker_threads);
  impl_->work.emplace(core.io.get_executor());
  for (int i = 0; i < core.options.io_threads; ++i) {
    impl_->io_threads.emplace_back([&core] { core.io.run(); });
  }
  for (const auto& acceptor : impl_->acceptors) {
    acceptor->Start();
  }
  std::string where = impl_->unix_socket.path;
  if (impl_->tcp_port != 0) {
    absl::StrAppend(&where, where.empty() ? "" : " and ", "127.0.0.1:", impl_->tcp_port);
  }
  spdlog::info("{}: listening on {}", core.options.name, where);
  return absl::OkStatus();
}

void Server::Stop() {
  if (impl_->stopped) {
    return;
  }
  impl_->stopped = true;
  internal::ServerCore& core = *impl_->core;
  core.BeginStop();
  if (impl_->started) {
    for (const auto& acceptor : impl_->acceptors) {
      acceptor->Close();
    }
    for (const auto& connection : core.Connections()) {
      connection->Shutdown();
    }
    if (!core.WaitForNoConnections(core.options.stop_grace)) {
      spdlog::warn("{}: closing {} connections still busy after {} ms", core.options.name,
                   core.connection_count(), core.options.stop_grace.count());
      for (const auto& connection : core.Connections()) {
        connection->ForceClose("server stopped");
      }
      core.WaitForNoConnections(std::chrono::milliseconds(1000));
    }
    core.workers->join();  // blocking handlers return (their responses go nowhere)
  }
  core.loop->Kill();  // from here on, responders kept by handlers post nothing
  impl_->work.reset();
  core.io.stop();
  for (std::thread& thread : impl_->io_threads) {
    thread.join();
  }
  impl_->io_threads.clear();
  impl_->acceptors.clear();
  RemoveUnixSocketFile(impl_->unix_socket);
  impl_->unix_socket.lock.reset();
}

uint16_t Server::tcp_port() const { return impl_->tcp_port; }
const std::string& Server::socket_path() const { return impl_->unix_socket.path; }
size_t Server::connection_count() const { return impl_->core->connection_count(); }

}  // namespace abox::http
