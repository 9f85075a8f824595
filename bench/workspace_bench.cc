// Workspace sync benchmarks (issue 4). Boots one real microVM and, in one run, measures:
//   W1  cold sync of a ~100 MB, 10,000-file tree (abox: manifest + tar.zst through the agent)
//   W2  sync after one changed file in that tree (median of --runs)
//   W3  a plain full `tar c | tar x` copy of the tree through the same channel (exec stdin)
//   W4  rsync between two host directories: cold, and after one changed file (the floor)
// Prints a Markdown table for docs/BENCHMARKS.md and, with --json FILE, the raw numbers.
//
//   workspace_bench [--runs N] [--files N] [--bytes TOTAL] [--json FILE]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/base/child_process.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/runtime/agent_guest_tools.h"
#include "src/runtime/sandbox.h"
#include "src/workspace/file_set.h"
#include "src/workspace/manifest_scan.h"
#include "src/workspace/sync.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A source-like tree: text files of mixed sizes (compressible like code) plus a few binaries.
uint64_t MakeTree(const fs::path& root, int files, uint64_t total_bytes) {
  std::mt19937_64 rng(42);
  std::vector<std::string> words = {"int ",
                                    "return ",
                                    "if (",
                                    "for (",
                                    "const ",
                                    "auto ",
                                    "std::string ",
                                    "value",
                                    "count",
                                    " = ",
                                    ";\n",
                                    "}\n",
                                    "// comment about the code\n",
                                    "name_",
                                    "0x",
                                    "42"};
  uint64_t per_file = total_bytes / static_cast<uint64_t>(files);
  uint64_t written = 0;
  for (int i = 0; i < files; ++i) {
    fs::path p = root / absl::StrCat("pkg", i % 100) / absl::StrCat("mod", i % 7) /
                 absl::StrCat("file", i, i % 50 == 0 ? ".bin" : ".cc");
    fs::create_directories(p.parent_path());
    uint64_t size = per_file / 2 + rng() % per_file;
    std::string data;
    data.reserve(size);
    if (i % 50 == 0) {
      while (data.size() < size) {
        uint64_t r = rng();
        data.append(reinterpret_cast<const char*>(&r), 8);
      }
    } else {
      while (data.size() < size) {
        data += words[rng() % words.size()];
      }
    }
    data.resize(size);
    std::ofstream(p, std::ios::binary) << data;
    written += size;
  }
  return written;
}

// Runs argv in the guest as root, feeding `stdin_cmd`'s stdout (a host shell pipeline) to it.
double PipeIntoGuest(abox::runtime::Sandbox& sb, const std::string& host_cmd,
                     std::vector<std::string> argv) {
  Clock::time_point start = Clock::now();
  auto exec = sb.agent().StartExec({.argv = std::move(argv), .user = "root", .stdin_open = true});
  if (!exec.ok()) {
    std::fprintf(stderr, "exec: %s\n", std::string(exec.status().message()).c_str());
    return -1;
  }
  FILE* p = ::popen(host_cmd.c_str(), "r");
  std::vector<char> buf(1 << 16);
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) {
    if (!(*exec)->WriteStdin(absl::string_view(buf.data(), n)).ok()) {
      break;
    }
  }
  ::pclose(p);
  (*exec)->CloseStdin();
  while ((*exec)->ReadOutput()) {
  }
  auto r = (*exec)->Wait();
  if (!r.ok() || r->ShellCode() != 0) {
    std::fprintf(stderr, "guest command failed\n");
  }
  return Ms(Clock::now() - start);
}

double TimeShell(const std::string& cmd) {
  Clock::time_point start = Clock::now();
  if (std::system(cmd.c_str()) != 0) {  // NOLINT
    std::fprintf(stderr, "failed: %s\n", cmd.c_str());
  }
  return Ms(Clock::now() - start);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 10;
  int files = 10000;
  uint64_t total = 100ull << 20;
  std::string json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--runs") {
      (void)absl::SimpleAtoi(argv[i + 1], &runs);
    } else if (flag == "--files") {
      (void)absl::SimpleAtoi(argv[i + 1], &files);
    } else if (flag == "--bytes") {
      (void)absl::SimpleAtoi(argv[i + 1], &total);
    } else if (flag == "--json") {
      json_path = argv[i + 1];
    }
  }
  char tmpl[] = "/tmp/abox-wsbench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    return 1;
  }
  fs::path work(tmpl);
  fs::path tree = work / "tree";
  uint64_t bytes = MakeTree(tree, files, total);
  std::system(absl::StrCat("sync").c_str());  // NOLINT

  auto vmm = abox::runtime::CreateDefaultVmm();
  if (!vmm.ok()) {
    std::fprintf(stderr, "%s\n", std::string(vmm.status().message()).c_str());
    return 1;
  }
  abox::runtime::SandboxConfig config;
  config.memory_mib = 1024;
  auto sb = abox::runtime::Sandbox::Boot(**vmm, config, [](const std::string&) {});
  if (!sb.ok()) {
    std::fprintf(stderr, "%s\n", std::string(sb.status().message()).c_str());
    return 1;
  }
  abox::runtime::AgentGuestTools tools((*sb)->agent());
  auto state = abox::workspace::WorkspaceState::Create((work / "state").string(),
                                                       {.host_root = tree.string()});
  if (!state.ok()) {
    std::fprintf(stderr, "%s\n", std::string(state.status().message()).c_str());
    return 1;
  }

  // W1: cold sync.
  Clock::time_point start = Clock::now();
  auto cold = abox::workspace::SyncIn(**state, tools);
  double cold_ms = Ms(Clock::now() - start);
  if (!cold.ok()) {
    std::fprintf(stderr, "cold sync: %s\n", std::string(cold.status().message()).c_str());
    return 1;
  }
  // W2: one changed file, repeated.
  std::vector<double> one;
  for (int r = 0; r < runs; ++r) {
    std::ofstream(tree / "pkg7/mod0/file7.cc", std::ios::app) << "// edit " << r << "\n";
    start = Clock::now();
    auto s = abox::workspace::SyncIn(**state, tools);
    one.push_back(Ms(Clock::now() - start));
    if (!s.ok() || s->files != 1) {
      std::fprintf(stderr, "one-file sync did not send exactly one file\n");
    }
  }
  // No change at all (nothing is sent; the guest is not contacted).
  std::vector<double> none;
  for (int r = 0; r < runs; ++r) {
    start = Clock::now();
    (void)abox::workspace::SyncIn(**state, tools);
    none.push_back(Ms(Clock::now() - start));
  }
  // Where the no-change time goes: the file set (git ls-files or a walk) and the stat scan.
  std::vector<double> fileset_ms;
  std::vector<double> scan_ms;
  for (int r = 0; r < runs; ++r) {
    start = Clock::now();
    auto fs_set = abox::workspace::ComputeFileSet(tree.string(), {});
    fileset_ms.push_back(Ms(Clock::now() - start));
    if (!fs_set.ok()) {
      break;
    }
    abox::workspace::ScanOptions scan;
    scan.cache = &(*state)->host_cache();
    start = Clock::now();
    (void)abox::workspace::ScanPaths(tree.string(), fs_set->files, scan);
    scan_ms.push_back(Ms(Clock::now() - start));
  }
  // W3: a full plain tar through the same channel.
  double tar_ms = PipeIntoGuest(**sb, absl::StrCat("tar cf - -C '", tree.string(), "' ."),
                                {"sh", "-c", "mkdir -p /tmp/tarcopy && tar xf - -C /tmp/tarcopy"});
  // W4: rsync between two host directories.
  double rsync_cold =
      TimeShell(absl::StrCat("rsync -a '", tree.string(), "/' '", (work / "rsync").string(), "/'"));
  std::vector<double> rsync_one;
  for (int r = 0; r < runs; ++r) {
    std::ofstream(tree / "pkg7/mod0/file7.cc", std::ios::app) << "// rsync " << r << "\n";
    rsync_one.push_back(TimeShell(
        absl::StrCat("rsync -a '", tree.string(), "/' '", (work / "rsync").string(), "/'")));
  }
  (void)(*sb)->Destroy();
  (void)abox::base::RemoveUnder("/tmp", work);

  double mb = static_cast<double>(bytes) / 1e6;
  std::printf("| what | time | throughput |\n|---|---|---|\n");
  std::printf("| W1 cold sync, %d files, %.0f MB (%.1f MB on the wire) | %.0f ms | %.0f MB/s |\n",
              files, mb, static_cast<double>(cold->archive_bytes) / 1e6, cold_ms,
              mb / (cold_ms / 1000));
  std::printf("| W2 sync after one changed file (median of %d) | %.1f ms | |\n", runs, Median(one));
  std::printf("| W2b sync with nothing changed (median of %d) | %.1f ms | |\n", runs, Median(none));
  std::printf("| W2c of which: file set %.1f ms, stat scan %.1f ms (medians) | | |\n",
              Median(fileset_ms), Median(scan_ms));
  std::printf("| W3 full `tar c \\| tar x` through the same channel | %.0f ms | %.0f MB/s |\n",
              tar_ms, mb / (tar_ms / 1000));
  std::printf("| W4 rsync host→host, cold | %.0f ms | %.0f MB/s |\n", rsync_cold,
              mb / (rsync_cold / 1000));
  std::printf("| W4b rsync host→host, one changed file (median) | %.1f ms | |\n",
              Median(rsync_one));
  if (!json_path.empty()) {
    nlohmann::json j = {{"files", files},           {"bytes", bytes},
                        {"cold_ms", cold_ms},       {"archive_bytes", cold->archive_bytes},
                        {"one_file_ms", one},       {"no_change_ms", none},
                        {"tar_ms", tar_ms},         {"rsync_cold_ms", rsync_cold},
                        {"rsync_one_ms", rsync_one}};
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}
