// abox-jail [options] -- QEMU ARGS...: enters the jail (src/vmm/jail.h) and execs QEMU. Started by
// abox-shim in a child it cloned into new namespaces; says what failed on stderr (QEMU's log,
// which the shim reports) and exits 126.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "src/vmm/jail.h"

extern char** environ;

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  size_t command = 0;
  absl::StatusOr<abox::vmm::JailOptions> options = abox::vmm::ParseJailArgv(args, &command);
  if (!options.ok()) {
    std::fprintf(stderr, "abox-jail: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  if (absl::Status s = abox::vmm::EnterJail(*options); !s.ok()) {
    std::fprintf(stderr, "abox-jail: %s\n", std::string(s.message()).c_str());
    return 126;
  }
  // argv + 1 + command: the command's own argv, still NULL-terminated.
  char** command_argv = argv + 1 + command;
  ::execve(command_argv[0], command_argv, environ);
  std::perror("abox-jail: execve");
  return 126;
}
