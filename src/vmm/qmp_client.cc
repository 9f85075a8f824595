#include "src/vmm/qmp_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unix_socket.h"

namespace abox::vmm {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// QMP replies are shallow; deep nesting can only be an attack on the parser.
constexpr int kMaxJsonDepth = 64;
// Longest QEMU error description we quote.
constexpr size_t kMaxDescription = 512;

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

bool NestingWithin(const std::string& text, int limit) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limit) {
        return false;
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

std::string Truncated(const std::string& s) {
  if (s.size() <= kMaxDescription) {
    return s;
  }
  return absl::StrCat(s.substr(0, kMaxDescription), "...");
}

absl::Status ErrorReplyToStatus(const std::string& command, const json& error) {
  if (!error.is_object()) {
    return absl::InternalError(absl::StrCat("QMP ", command, ": malformed error reply"));
  }
  auto cls = error.find("class");
  auto desc = error.find("desc");
  std::string cls_text = cls != error.end() && cls->is_string() ? cls->get<std::string>() : "";
  std::string desc_text =
      desc != error.end() && desc->is_string() ? desc->get<std::string>() : "(no description)";
  std::string message =
      absl::StrCat("QMP ", command, " failed: ", Truncated(cls_text), ": ", Truncated(desc_text));
  if (cls_text == "CommandNotFound") {
    return absl::UnimplementedError(message);
  }
  if (cls_text == "DeviceNotFound") {
    return absl::NotFoundError(message);
  }
  return absl::FailedPreconditionError(message);
}

}  // namespace

absl::StatusOr<QmpClient> QmpClient::Connect(const std::string& path,
                                             std::chrono::milliseconds timeout, Options options) {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd fd, base::ConnectUnixSocket(path));
  return Create(std::move(fd), timeout, options);
}

absl::StatusOr<QmpClient> QmpClient::Create(base::UniqueFd fd, std::chrono::milliseconds timeout,
                                            Options options) {
  if (!fd) {
    return absl::InvalidArgumentError("QmpClient: invalid descriptor");
  }
  ABOX_RETURN_IF_ERROR(base::SetNonBlocking(fd.get()));
  QmpClient client(std::move(fd), options);
  ABOX_RETURN_IF_ERROR(client.Handshake(Clock::now() + timeout));
  return client;
}

absl::Status QmpClient::Handshake(Clock::time_point deadline) {
  ABOX_ASSIGN_OR_RETURN(json greeting, ReadMessage(deadline));
  auto qmp = greeting.find("QMP");
  if (qmp == greeting.end() || !qmp->is_object()) {
    return Fail(absl::InternalError("QMP: the first message is not a greeting"));
  }
  greeting_ = *qmp;
  ABOX_ASSIGN_OR_RETURN(json ignored, Execute("qmp_capabilities", nullptr,
                                              std::chrono::milliseconds(RemainingMs(deadline))));
  (void)ignored;
  return absl::OkStatus();
}

absl::Status QmpClient::Fail(absl::Status status) {
  if (broken_.ok()) {
    broken_ = status;
  }
  fd_.reset();
  return status;
}

void QmpClient::KeepEvent(json event) {
  events_.push_back(std::move(event));
  while (events_.size() > options_.max_pending_events) {
    events_.pop_front();
    ++dropped_events_;
  }
}

std::deque<json> QmpClient::TakeEvents() { return std::exchange(events_, {}); }

absl::Status QmpClient::WriteLine(const std::string& line, Clock::time_point deadline,
                                  int pass_fd) {
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = 0;
    if (pass_fd >= 0) {
      // The descriptor rides on the first bytes of the command (SCM_RIGHTS), as QMP's getfd
      // expects.
      iovec iov{const_cast<char*>(line.data() + done), line.size() - done};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
      n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
      if (n > 0) {
        pass_fd = -1;
      }
    } else {
      n = ::send(fd_.get(), line.data() + done, line.size() - done, MSG_NOSIGNAL);
    }
    if (n >= 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET) {
      return Fail(absl::UnavailableError("QEMU closed the QMP connection"));
    }
    if (errno != EAGAIN) {
      return Fail(base::ErrnoError("send(qmp)"));
    }
    pollfd p{fd_.get(), POLLOUT, 0};
    int r = ::poll(&p, 1, RemainingMs(deadline));
    if (r == 0) {
      return absl::DeadlineExceededError("QMP: QEMU is not reading its socket");
    }
    if (r < 0 && errno != EINTR) {
      return Fail(base::ErrnoError("poll(qmp)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<json> QmpClient::ReadMessage(Clock::time_point deadline) {
  for (;;) {
    size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      if (!line.empty() && line.back() == '\r') {
        line.pop_back();
      }
      if (line.find_first_not_of(" \t") == std::string::npos) {
        continue;
      }
      if (!NestingWithin(line, kMaxJsonDepth)) {
        return Fail(absl::InternalError("QMP: message nested too deeply"));
      }
      json message = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (message.is_discarded()) {
        return Fail(
            absl::InternalError(absl::StrCat("QMP: invalid JSON from QEMU: ", Truncated(line))));
      }
      if (!message.is_object()) {
        return Fail(absl::InternalError("QMP: message is not a JSON object"));
      }
      return message;
    }
    if (buffer_.size() > options_.max_message_bytes) {
      return Fail(absl::ResourceExhaustedError(
          absl::StrCat("QMP: message longer than ", options_.max_message_bytes, " bytes")));
    }
    pollfd p{fd_.get(), POLLIN, 0};
    int r = ::poll(&p, 1, RemainingMs(deadline));
    if (r == 0) {
      return absl::DeadlineExceededError("QMP: no message from QEMU before the deadline");
    }
    if (r < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Fail(base::ErrnoError("poll(qmp)"));
    }
    char chunk[65536];
    size_t want = std::min(sizeof(chunk), options_.max_message_bytes + 1 - buffer_.size());
    absl::StatusOr<size_t> n = base::ReadSome(fd_.get(), chunk, want);
    if (!n.ok()) {
      if (absl::IsUnavailable(n.status())) {
        continue;  // EAGAIN: spurious wakeup
      }
      return Fail(n.status());
    }
    if (*n == 0) {
      return Fail(absl::UnavailableError("QEMU closed the QMP connection"));
    }
    buffer_.append(chunk, *n);
  }
}

absl::StatusOr<json> QmpClient::Execute(const std::string& command, const json& arguments,
                                        std::chrono::milliseconds timeout) {
  return Run(command, arguments, timeout, -1);
}

absl::Status QmpClient::SendFd(const std::string& name, int fd, std::chrono::milliseconds timeout) {
  if (fd < 0) {
    return absl::InvalidArgumentError("QMP getfd: no descriptor to pass");
  }
  return Run("getfd", json{{"fdname", name}}, timeout, fd).status();
}

absl::StatusOr<json> QmpClient::Run(const std::string& command, const json& arguments,
                                    std::chrono::milliseconds timeout, int pass_fd) {
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("QMP connection unusable after an earlier error: ", broken_.message()));
  }
  if (!arguments.is_null() && !arguments.is_object()) {
    return absl::InvalidArgumentError("QMP arguments must be an object");
  }
  Clock::time_point deadline = Clock::now() + timeout;
  uint64_t id = next_id_++;
  json request = {{"execute", command}, {"id", id}};
  if (arguments.is_object()) {
    request["arguments"] = arguments;
  }
  ABOX_RETURN_IF_ERROR(WriteLine(
      request.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", deadline, pass_fd));
  for (;;) {
    absl::StatusOr<json> message = ReadMessage(deadline);
    if (!message.ok()) {
      if (absl::IsDeadlineExceeded(message.status())) {
        return absl::DeadlineExceededError(
            absl::StrCat("QMP ", command, ": no reply within ", timeout.count(), " ms"));
      }
      return message.status();
    }
    if (auto event = message->find("event"); event != message->end()) {
      if (!event->is_string()) {
        return Fail(absl::InternalError("QMP: event without a name"));
      }
      KeepEvent(*std::move(message));
      continue;
    }
    auto ret = message->find("return");
    auto err = message->find("error");
    if (ret == message->end() && err == message->end()) {
      return Fail(absl::InternalError("QMP: message is neither a reply nor an event"));
    }
    auto reply_id = message->find("id");
    if (reply_id == message->end() || !reply_id->is_number_unsigned()) {
      return Fail(absl::InternalError(absl::StrCat("QMP ", command, ": reply without a valid id")));
    }
    uint64_t got = reply_id->get<uint64_t>();
    if (got < id) {
      continue;  // The late reply to a command that timed out earlier.
    }
    if (got != id) {
      return Fail(
          absl::InternalError(absl::StrCat("QMP ", command, ": reply for unknown id ", got)));
    }
    if (err != message->end()) {
      return ErrorReplyToStatus(command, *err);
    }
    return std::move(*ret);
  }
}

absl::Status QmpClient::Quit(std::chrono::milliseconds timeout) {
  absl::StatusOr<json> r = Execute("quit", nullptr, timeout);
  if (r.ok() || absl::IsUnavailable(r.status())) {
    return absl::OkStatus();
  }
  return r.status();
}

}  // namespace abox::vmm
