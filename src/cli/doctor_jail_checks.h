// `abox doctor`'s checks of what the QEMU jail gives each running QEMU (decision 0021,
// src/vmm/jail.h), as /proc shows it: sandbox.<id>.{uid,namespaces,root,limits}. Internal to
// the doctor: SandboxChecks (doctor_checks.h) calls it.
#pragma once

#include <string>
#include <vector>

#include "src/cli/doctor_check.h"
#include "src/cli/doctor_checks.h"

namespace abox::cli {

// The uid, namespaces, root and limits checks of the QEMU `facts` names, whose
// /proc/<pid>/status text is `status`.
[[nodiscard]] std::vector<Check> JailChecks(const HostView& host, const SandboxFacts& facts,
                                            const std::string& status);

}  // namespace abox::cli
