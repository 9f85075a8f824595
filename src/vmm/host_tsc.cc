#include "src/vmm/host_tsc.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/base/io.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define ABOX_HAVE_RDTSC 1
#endif

namespace abox::vmm {
namespace {

// The value after "key<spaces>:" on the first line that starts with `key`.
std::optional<std::string> CpuinfoField(const std::string& cpuinfo, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    if (!absl::ConsumePrefix(&line, key)) {
      continue;
    }
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, ":")) {
      continue;  // e.g. "flags" vs "flagsfoo"
    }
    return std::string(absl::StripAsciiWhitespace(line));
  }
  return std::nullopt;
}

#ifdef ABOX_HAVE_RDTSC
uint64_t MonotonicRawNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// TSC ticks per millisecond over ~20 ms; the median of three runs resists a preemption.
std::optional<uint64_t> CalibrateTscKhz() {
  std::array<uint64_t, 3> samples{};
  for (uint64_t& sample : samples) {
    uint64_t t0 = MonotonicRawNs();
    uint64_t c0 = __rdtsc();
    uint64_t t1 = t0;
    while (t1 - t0 < 20000000ULL) {
      t1 = MonotonicRawNs();
    }
    uint64_t c1 = __rdtsc();
    sample = (c1 - c0) * 1000000ULL / (t1 - t0);
  }
  std::sort(samples.begin(), samples.end());
  if (samples[1] == 0) {
    return std::nullopt;
  }
  return samples[1];
}
#endif

}  // namespace

std::optional<uint64_t> ParseCpuinfoKhz(const std::string& cpuinfo) {
  std::optional<std::string> value = CpuinfoField(cpuinfo, "cpu MHz");
  if (!value) {
    return std::nullopt;
  }
  absl::string_view v = *value;
  std::vector<absl::string_view> parts = absl::StrSplit(v, absl::MaxSplits('.', 1));
  uint64_t mhz = 0;
  if (parts[0].empty() || parts[0].size() > 7 || !absl::SimpleAtoi(parts[0], &mhz)) {
    return std::nullopt;
  }
  for (char c : parts[0]) {
    if (!absl::ascii_isdigit(c)) {
      return std::nullopt;
    }
  }
  uint64_t khz = mhz * 1000;
  if (parts.size() == 2) {
    absl::string_view frac = parts[1];
    uint64_t scale = 100;
    for (size_t i = 0; i < frac.size(); ++i) {
      if (!absl::ascii_isdigit(frac[i])) {
        return std::nullopt;
      }
      if (i < 3) {
        khz += static_cast<uint64_t>(frac[i] - '0') * scale;
        scale /= 10;
      }
    }
  }
  if (khz == 0) {
    return std::nullopt;
  }
  return khz;
}

bool CpuinfoHasFlag(const std::string& cpuinfo, const std::string& flag) {
  std::optional<std::string> flags = CpuinfoField(cpuinfo, "flags");
  if (!flags) {
    return false;
  }
  for (absl::string_view f : absl::StrSplit(*flags, ' ', absl::SkipEmpty())) {
    if (f == flag) {
      return true;
    }
  }
  return false;
}

std::optional<uint64_t> ChooseTscKhz(std::optional<uint64_t> sysfs_khz,
                                     std::optional<uint64_t> cpuinfo_khz,
                                     std::optional<uint64_t> calibrated_khz) {
  if (sysfs_khz && *sysfs_khz > 0) {
    return sysfs_khz;
  }
  if (calibrated_khz) {
    // "cpu MHz" is the kernel's own TSC value on most VMs, but the current (boost) clock on
    // bare metal with APERF/MPERF; trust it only when it agrees with the measurement.
    if (cpuinfo_khz) {
      uint64_t diff = *cpuinfo_khz > *calibrated_khz ? *cpuinfo_khz - *calibrated_khz
                                                     : *calibrated_khz - *cpuinfo_khz;
      if (diff * 200 <= *calibrated_khz) {
        return cpuinfo_khz;
      }
    }
    return calibrated_khz;
  }
  return cpuinfo_khz;
}

absl::StatusOr<uint64_t> HostTscKhz() {
  std::optional<uint64_t> sysfs;
  if (auto s = base::ReadFile("/sys/devices/system/cpu/cpu0/tsc_freq_khz", 64); s.ok()) {
    uint64_t v = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(*s), &v) && v > 0) {
      sysfs = v;
    }
  }
  std::string cpuinfo;
  if (auto s = base::ReadFile("/proc/cpuinfo", 4 << 20); s.ok()) {
    cpuinfo = *std::move(s);
  }
  std::optional<uint64_t> calibrated;
#ifdef ABOX_HAVE_RDTSC
  if (!sysfs && CpuinfoHasFlag(cpuinfo, "constant_tsc") && CpuinfoHasFlag(cpuinfo, "nonstop_tsc")) {
    calibrated = CalibrateTscKhz();
  }
#endif
  std::optional<uint64_t> khz = ChooseTscKhz(sysfs, ParseCpuinfoKhz(cpuinfo), calibrated);
  if (!khz) {
    return absl::NotFoundError(
        "cannot determine the host TSC frequency (no sysfs tsc_freq_khz, no invariant TSC, no "
        "\"cpu MHz\" in /proc/cpuinfo)");
  }
  return *khz;
}

}  // namespace abox::vmm
