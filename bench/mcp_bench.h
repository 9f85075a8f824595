// abox-mcp against the CLI (issue 14): an `exec` of `true` as an MCP tool call on one live
// abox-mcp session, interleaved with `abox exec ID -- true` runs (each a whole CLI process), and
// the size of the tool list a client puts in front of its model.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "bench/daemon_fixture.h"

namespace abox::bench {

struct McpBenchResult {
  std::vector<double> mcp_ms;  // tools/call exec, request written -> result read
  std::vector<double> cli_ms;  // `abox exec ID -- true`, spawn -> exit
  size_t tools = 0;            // tools/list: how many
  size_t tools_bytes = 0;      // the `tools` array as compact JSON
  std::string skip;            // set when the measurement could not run, and why
};

// Starts `abox_mcp` (which finds aboxd through the environment, as the bench set it), runs
// `runs` pairs after one warm-up pair, and stops it. Stops early when `interrupted` turns true.
McpBenchResult MeasureMcpAgainstCli(const std::string& abox_mcp, const std::string& abox,
                                    const BenchHome& home, const std::string& sandbox, int runs,
                                    const std::atomic<bool>& interrupted);

}  // namespace abox::bench
