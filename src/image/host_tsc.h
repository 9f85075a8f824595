// The host's TSC frequency, which the Debian kernel needs on its command line
// (tsc_early_khz=) to boot on QEMU microvm under TCG without hanging at "Marking TSC unstable".
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::image {

// Host TSC frequency in kHz, from the first source that has it:
// /sys/devices/system/cpu/cpu0/tsc_freq_khz, the kernel log (`dmesg`: "tsc: Refined TSC
// clocksource calibration: X MHz", else "tsc: Detected X MHz processor"), /proc/cpuinfo
// "cpu MHz". kNotFound when none does (x86 only).
[[nodiscard]] absl::StatusOr<uint64_t> HostTscKhz();

// Parsers behind HostTscKhz, exposed for tests. Each returns nullopt when nothing matches.
// "Refined" wins over "Detected" in a kernel log.
[[nodiscard]] std::optional<uint64_t> ParseTscKhzFromKernelLog(absl::string_view log);
[[nodiscard]] std::optional<uint64_t> ParseTscKhzFromCpuinfo(absl::string_view cpuinfo);

// "2596.146" (MHz) -> 2596146 (kHz), exact decimal arithmetic; nullopt if malformed/zero.
[[nodiscard]] std::optional<uint64_t> MhzStringToKhz(absl::string_view mhz);

}  // namespace abox::image
