#include "src/vmm/testing/fake_qmp_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "absl/cleanup/cleanup.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unix_socket.h"

namespace abox::vmm::testing {

using nlohmann::json;

std::string FakeQmpServer::Greeting() {
  return R"({"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, )"
         R"("package": "fake"}, "capabilities": ["oob"]}})";
}

std::string FakeQmpServer::Reply(const json& request, const json& value) {
  json reply = {{"return", value}};
  if (request.is_object() && request.contains("id")) {
    reply["id"] = request["id"];
  }
  return reply.dump();
}

FakeQmpServer::Handler FakeQmpServer::AlwaysOk() {
  return
      [](const json& request) { return std::vector<std::string>{Reply(request, json::object())}; };
}

absl::StatusOr<std::unique_ptr<FakeQmpServer>> FakeQmpServer::Start(
    std::vector<std::string> greeting, Handler handler) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return base::ErrnoError("socketpair");
  }
  std::unique_ptr<FakeQmpServer> server(new FakeQmpServer(std::move(greeting), std::move(handler)));
  server->client_.reset(fds[0]);
  ABOX_RETURN_IF_ERROR(server->StartThread(base::UniqueFd(fds[1]), /*listening=*/false));
  return server;
}

absl::StatusOr<std::unique_ptr<FakeQmpServer>> FakeQmpServer::Listen(
    const std::string& path, std::vector<std::string> greeting, Handler handler) {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd listener, base::ListenUnixSocket(path));
  std::unique_ptr<FakeQmpServer> server(new FakeQmpServer(std::move(greeting), std::move(handler)));
  ABOX_RETURN_IF_ERROR(server->StartThread(std::move(listener), /*listening=*/true));
  return server;
}

absl::Status FakeQmpServer::StartThread(base::UniqueFd server, bool listening) {
  ABOX_ASSIGN_OR_RETURN(base::Pipe stop, base::MakePipe());
  stop_read_ = std::move(stop.read);
  stop_write_ = std::move(stop.write);
  server_ = std::move(server);
  thread_ = std::thread([this, listening] { Serve(server_.get(), listening); });
  return absl::OkStatus();
}

FakeQmpServer::~FakeQmpServer() {
  stop_write_.reset();  // wakes the thread
  if (thread_.joinable()) {
    thread_.join();
  }
}

void FakeQmpServer::Hangup() {
  std::lock_guard<std::mutex> lock(mu_);
  if (conn_fd_ >= 0) {
    ::shutdown(conn_fd_, SHUT_RDWR);
  }
}

std::vector<json> FakeQmpServer::requests() {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void FakeQmpServer::Serve(int fd, bool listening) {
  // Waits for `fd` to be readable; false when asked to stop.
  auto wait_readable = [this](int wait_fd) {
    pollfd p[2] = {{wait_fd, POLLIN, 0}, {stop_read_.get(), POLLIN, 0}};
    while (::poll(p, 2, -1) < 0) {
      if (errno != EINTR) {
        return false;
      }
    }
    return p[1].revents == 0;
  };
  base::UniqueFd accepted;
  if (listening) {
    if (!wait_readable(fd)) {
      return;
    }
    accepted.reset(::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (!accepted) {
      return;
    }
    (void)base::SetNonBlocking(accepted.get(), false);
    fd = accepted.get();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    conn_fd_ = fd;
  }
  absl::Cleanup forget = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    conn_fd_ = -1;
  };
  auto send_line = [fd](std::string line) {
    if (line.empty() || line.back() != '\n') {
      line += "\r\n";
    }
    return base::WriteAll(fd, line).ok();
  };
  for (const std::string& line : greeting_) {
    if (!send_line(line)) {
      return;
    }
  }
  std::string buffer;
  char chunk[4096];
  while (wait_readable(fd)) {
    absl::StatusOr<size_t> n = base::ReadSome(fd, chunk, sizeof(chunk));
    if (!n.ok() || *n == 0) {
      return;
    }
    buffer.append(chunk, *n);
    size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      json request = json::parse(buffer.substr(0, newline), nullptr, false);
      buffer.erase(0, newline + 1);
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(request);
      }
      for (const std::string& reply : handler_(request)) {
        if (!send_line(reply)) {
          return;
        }
      }
    }
  }
}

}  // namespace abox::vmm::testing
