#include "src/cli/output.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "src/cli/terminal_text.h"

namespace abox::cli {

void PrintError(const absl::Status& status) {
  // Errors quote the guest and the daemon (an exec's error, a console line): on a terminal,
  // their control characters are shown, not obeyed.
  std::string msg = ForTerminal(stderr, std::string(status.message()));
  std::fprintf(stderr, "abox: error: %s\n", msg.c_str());
}

std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) {
    width[i] = header[i].size();
    for (const auto& r : rows) {
      if (i < r.size()) {
        width[i] = std::max(width[i], r[i].size());
      }
    }
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (size_t i = 0; i < header.size(); ++i) {
      std::string cell = i < cells.size() ? cells[i] : "";
      l += cell;
      if (i + 1 < header.size()) {
        l += std::string(width[i] - cell.size() + 2, ' ');
      }
    }
    while (!l.empty() && l.back() == ' ') {
      l.pop_back();
    }
    out += l + "\n";
  };
  line(header);
  for (const auto& r : rows) {
    line(r);
  }
  return out;
}

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%d B", bytes) : absl::StrFormat("%.1f %s", v, units[u]);
}

}  // namespace abox::cli
