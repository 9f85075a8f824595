#include "src/image/host_tsc.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/base/child_process.h"
#include "src/base/io.h"

namespace abox::image {
namespace {

// Returns the number right after `marker` on the last line that contains it, e.g. "2596.146"
// for marker "calibration: " in "...calibration: 2596.146 MHz".
std::optional<uint64_t> LastMhzAfter(absl::string_view text, absl::string_view marker) {
  std::optional<uint64_t> found;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    size_t at = line.find(marker);
    if (at == absl::string_view::npos) {
      continue;
    }
    absl::string_view rest = line.substr(at + marker.size());
    size_t end = rest.find(' ');
    absl::string_view number = rest.substr(0, end);
    absl::string_view unit = end == absl::string_view::npos ? "" : rest.substr(end + 1);
    if (!absl::StartsWith(unit, "MHz")) {
      continue;
    }
    if (auto khz = MhzStringToKhz(number)) {
      found = khz;
    }
  }
  return found;
}

}  // namespace

std::optional<uint64_t> MhzStringToKhz(absl::string_view mhz) {
  mhz = absl::StripAsciiWhitespace(mhz);
  absl::string_view whole = mhz, frac;
  if (size_t dot = mhz.find('.'); dot != absl::string_view::npos) {
    whole = mhz.substr(0, dot);
    frac = mhz.substr(dot + 1);
  }
  if (whole.empty() || whole.size() > 9) {
    return std::nullopt;
  }
  uint64_t w = 0;
  for (char c : whole) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
    w = w * 10 + static_cast<uint64_t>(c - '0');
  }
  uint64_t f = 0;
  for (size_t i = 0; i < 3; ++i) {  // kHz = three decimals of MHz; further digits truncated.
    char c = i < frac.size() ? frac[i] : '0';
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
    f = f * 10 + static_cast<uint64_t>(c - '0');
  }
  for (char c : frac) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
  }
  uint64_t khz = w * 1000 + f;
  if (khz == 0) {
    return std::nullopt;
  }
  return khz;
}

std::optional<uint64_t> ParseTscKhzFromKernelLog(absl::string_view log) {
  if (auto refined = LastMhzAfter(log, "tsc: Refined TSC clocksource calibration: ")) {
    return refined;
  }
  return LastMhzAfter(log, "tsc: Detected ");
}

std::optional<uint64_t> ParseTscKhzFromCpuinfo(absl::string_view cpuinfo) {
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    if (!absl::StartsWith(line, "cpu MHz")) {
      continue;
    }
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      continue;
    }
    return MhzStringToKhz(line.substr(colon + 1));
  }
  return std::nullopt;
}

absl::StatusOr<uint64_t> HostTscKhz() {
  if (auto sysfs = base::ReadFile("/sys/devices/system/cpu/cpu0/tsc_freq_khz", 64); sysfs.ok()) {
    uint64_t khz = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(*sysfs), &khz) && khz > 0) {
      return khz;
    }
  }
  if (auto dmesg = base::RunCommand({"dmesg"}); dmesg.ok() && dmesg->status.exit_code == 0) {
    if (auto khz = ParseTscKhzFromKernelLog(dmesg->out)) {
      return *khz;
    }
  }
  if (auto cpuinfo = base::ReadFile("/proc/cpuinfo", 16 << 20); cpuinfo.ok()) {
    if (auto khz = ParseTscKhzFromCpuinfo(*cpuinfo)) {
      return *khz;
    }
  }
  return absl::NotFoundError(
      "cannot determine the host TSC frequency (no tsc_freq_khz in sysfs, no 'tsc:' line in "
      "dmesg, no 'cpu MHz' in /proc/cpuinfo)");
}

}  // namespace abox::image
