// `abox doctor [--json] [--quick]`: named checks of the host, aboxd, the images, each running
// sandbox's QEMU (read back from /proc), egress and secrets, each pass / warn / fail / info with
// a one-line reason and what to do, then the residual risks that hold on this host. It only
// observes: it never starts aboxd, never runs a command in a sandbox and writes no file.
#pragma once

#include "CLI/CLI.hpp"
#include "src/cli/command.h"
#include "src/cli/doctor_check.h"

namespace abox::cli {

struct DoctorOptions {
  bool json = false;
  bool quick = false;  // skip the slow checks: image hashes, the KVM probe boot
};

// Runs every check against the real host and the daemon on the usual socket.
[[nodiscard]] DoctorReport RunDoctor(const DoctorOptions& options);

// Registers `doctor` on `app`; when parsed it sets `*action`, which prints the report and returns
// DoctorExitCode().
void AddDoctorCommand(CLI::App& app, Action* action);

}  // namespace abox::cli
