// The host's TSC frequency, which the stock Debian kernel needs on its command line
// (tsc_early_khz=) to boot on QEMU microvm under TCG without hanging at "Marking TSC unstable".
// Under TCG the guest reads the host's TSC, so the host's frequency is the right value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace abox::vmm {

// Host TSC frequency in kHz: sysfs `tsc_freq_khz` when the kernel exports it; otherwise a
// short calibration of the TSC against CLOCK_MONOTONIC_RAW (x86 with an invariant TSC),
// replaced by the kernel's "cpu MHz" from /proc/cpuinfo when the two agree within 0.5 % (so the
// value is stable across runs). kNotFound when there is no usable source (e.g. not x86).
[[nodiscard]] absl::StatusOr<uint64_t> HostTscKhz();

// The first "cpu MHz" value of /proc/cpuinfo text, in kHz, exact decimal arithmetic
// ("2596.146" -> 2596146). nullopt when missing, malformed or zero.
[[nodiscard]] std::optional<uint64_t> ParseCpuinfoKhz(const std::string& cpuinfo);

// Whether the first "flags" line of /proc/cpuinfo text lists `flag`.
[[nodiscard]] bool CpuinfoHasFlag(const std::string& cpuinfo, const std::string& flag);

// The policy of HostTscKhz over its (already gathered) sources.
[[nodiscard]] std::optional<uint64_t> ChooseTscKhz(std::optional<uint64_t> sysfs_khz,
                                                   std::optional<uint64_t> cpuinfo_khz,
                                                   std::optional<uint64_t> calibrated_khz);

}  // namespace abox::vmm
