// A hostile guest agent for end-to-end tests: boots like abox-guest (stage 1 from
// src/guest/stage1.cc), completes the handshake, then answers the first exec with the attack
// named by the exec's argv[0]. The host must drop it, fail the sandbox, say why, and survive.
//
//   oversize        a frame header claiming a 4 GiB payload
//   unknown-type    a frame of type 200
//   unknown-stream  stdout on a stream the host never opened
//   credit-lie      grants the host more stdin credit than the window holds
//   bad-exit        an exit frame whose JSON is broken
//   flood           pings forever while never reading (the host's replies pile up)
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "src/base/io.h"
#include "src/guest/stage1.h"
#include "src/proto/frame.h"
#include "src/proto/messages.h"

namespace {

using abox::proto::EncodeFrame;
using abox::proto::FrameType;

int OpenPort() {
  for (;;) {
    // Same discovery as the real agent: the sysfs entry whose name is the agent port.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/sys/class/virtio-ports", ec)) {
      auto name = abox::base::ReadFile((e.path() / "name").string(), 256);
      if (name.ok() && name->rfind("org.abox.agent.0", 0) == 0) {
        int fd = ::open(("/dev/" + e.path().filename().string()).c_str(), O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
          return fd;
        }
      }
    }
    ::usleep(10000);
  }
}

// Returns the next whole frame from the host, reading as needed. `pending` holds bytes read
// but not yet fed to the decoder (it stops at frame boundaries).
abox::proto::Frame ReadFrame(int fd, abox::proto::FrameDecoder& d, std::string& pending) {
  char buf[4096];
  for (;;) {
    pending.erase(0, d.Feed(pending));
    auto f = d.Next();
    if (f.ok() && *f) {
      return std::move(**f);
    }
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) {
      ::usleep(10000);  // no host connected yet
      continue;
    }
    pending.append(buf, static_cast<size_t>(n));
  }
}

void Send(int fd, const std::string& bytes) { (void)abox::base::WriteAll(fd, bytes); }

}  // namespace

int main() {
  if (abox::guest::IsInitramfsStage()) {
    abox::guest::RunStage1();
  }
  ::mount("proc", "/proc", "proc", 0, nullptr);
  int fd = OpenPort();
  abox::proto::FrameDecoder d;
  std::string pending;
  for (;;) {
    abox::proto::Frame f = ReadFrame(fd, d, pending);
    if (f.header.type == FrameType::kHello) {
      abox::proto::Hello h{.version = abox::proto::kProtocolVersion,
                           .min_version = abox::proto::kProtocolVersion,
                           .agent_version = "hostile",
                           .max_payload = abox::proto::kMaxPayload,
                           .window = abox::proto::kDefaultWindow};
      Send(fd, EncodeFrame(FrameType::kHello, 0, 0, abox::proto::EncodeHello(h)));
      continue;
    }
    if (f.header.type != FrameType::kOpen) {
      continue;
    }
    auto req = abox::proto::DecodeExecRequest(f.payload);
    std::string mode = req.ok() && !req->argv.empty() ? req->argv[0] : "oversize";
    uint32_t id = f.header.stream;
    std::fprintf(stderr, "hostile-guest: attack %s on stream %u\n", mode.c_str(), id);
    if (mode == "oversize") {
      std::string h = EncodeFrame(FrameType::kStdout, id, 0, "");
      h[0] = h[1] = h[2] = h[3] = '\xff';
      Send(fd, h);
    } else if (mode == "unknown-type") {
      std::string h = EncodeFrame(FrameType::kStdout, id, 0, "");
      h[8] = static_cast<char>(200);
      Send(fd, h);
    } else if (mode == "unknown-stream") {
      Send(fd, EncodeFrame(FrameType::kStdout, id + 100, 0, "x"));
    } else if (mode == "credit-lie") {
      // The host starts with a full window; any grant overflows it. (Output beyond credit is
      // covered deterministically by the HostSession unit tests: through a real VM it races
      // with the host's own grants.)
      Send(fd, EncodeFrame(FrameType::kCredit, id, 0,
                           abox::proto::EncodeCredit(abox::proto::kDefaultWindow)));
    } else if (mode == "bad-exit") {
      Send(fd, EncodeFrame(FrameType::kExit, id, 0, "{\"exit_code\": \"zero\""));
    } else if (mode == "flood") {
      std::string ping = EncodeFrame(FrameType::kPing, 0, 0, std::string(64, 'p'));
      std::string burst;
      for (int i = 0; i < 1000; ++i) {
        burst += ping;
      }
      for (;;) {
        Send(fd, burst);
      }
    }
    for (;;) {
      ::pause();
    }
  }
}
