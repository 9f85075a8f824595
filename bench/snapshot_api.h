// The API calls snapshot_bench makes against its aboxd, and what it reads from the host about
// the VMs: slow-reading connections, `true` through the exec path, the `ready` event, a QEMU's
// PSS and RSS, the template line of aboxd's log.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "bench/daemon_fixture.h"
#include "src/http/testing/http_test_client.h"

namespace abox::bench {

// A connection whose reads may wait `seconds` (the test client's 20 s is shorter than a cold
// create or a fork of ten under TCG); nullptr when it cannot connect.
std::unique_ptr<http::httptest::HttpTestClient> SlowConnect(const BenchHome& home,
                                                            int seconds = 300);

// One request on a fresh slow connection; status 0 when the daemon did not answer.
http::httptest::Response SlowCall(const BenchHome& home, const std::string& method,
                                  const std::string& target, const std::string& body = "");

// `true` through the API exec path on fresh connections (POST .../execs, GET .../output to the
// exit line); false (said on stderr) unless it exited 0.
bool RunTrue(const BenchHome& home, const std::string& sandbox);

// What the `ready` event of a sandbox says about its start.
struct ReadyInfo {
  std::string started_from = "?";
  int64_t boot_ms = -1;
  std::string note;
};

// The `ready` event of a sandbox (from GET /v1/events?since=0&sandbox=ID); "?" and -1 when it
// cannot be read.
ReadyInfo ReadReady(const BenchHome& home, const std::string& sandbox);

// Pss and Rss (KiB) of a process, from its smaps_rollup.
std::optional<std::pair<double, double>> PssRss(int64_t pid);

// What aboxd's log says about the template: "made in N ms (NAME)" or "loaded in N ms (NAME)";
// "" when it says neither.
std::string TemplateLine(const BenchHome& home);

}  // namespace abox::bench
