// libFuzzer target: QEMU's side of a QMP conversation is untrusted. The input is everything
// "QEMU" sends (greeting, replies, events, garbage); the client must never crash or hang.
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "src/base/io.h"
#include "src/vmm/qmp_client.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) {
    return 0;  // stays within one socket buffer, so the write below never blocks
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return 0;
  }
  int buffer = 1 << 18;
  ::setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  ::setsockopt(fds[0], SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  abox::base::UniqueFd qemu(fds[1]);
  (void)abox::base::WriteAll(qemu.get(),
                             std::string_view(reinterpret_cast<const char*>(data), size));
  ::shutdown(qemu.get(), SHUT_WR);  // EOF after the input: no call waits for its deadline
  absl::StatusOr<abox::vmm::QmpClient> client =
      abox::vmm::QmpClient::Create(abox::base::UniqueFd(fds[0]), std::chrono::milliseconds(1000),
                                   {.max_message_bytes = 4096, .max_pending_events = 8});
  if (client.ok()) {
    (void)client->Execute("query-status", nullptr, std::chrono::milliseconds(1000));
    (void)client->Execute("query-version", {{"a", 1}}, std::chrono::milliseconds(1000));
    (void)client->TakeEvents();
  }
  return 0;
}
