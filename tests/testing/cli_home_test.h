// A test of the abox CLI against an aboxd of its own: a private home (images linked to the test
// image's; golden templates its own), `abox` run with that home's environment, and at the
// end every sandbox removed and aboxd stopped. The e2e tests that drive the CLI derive from it.
#pragma once

#include <signal.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"

namespace abox::testing {

class CliHomeTest : public ::testing::Test {
 protected:
  void TearDown() override {
    RemoveAllSandboxes([this](std::vector<std::string> args) { return Abox(std::move(args)); });
    Abox({"daemon", "stop"});
  }

  // `abox ARGS...` in this test's home (it starts aboxd on demand).
  AboxResult Abox(std::vector<std::string> args) {
    AboxCall call;
    call.args = std::move(args);
    call.env = home_.Env();
    call.timeout_seconds = 240;
    return RunAbox(call);
  }

  // `abox create EXTRA...`: the new sandbox's id (a failure is reported, "" returned).
  std::string Create(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"create"};
    args.insert(args.end(), extra.begin(), extra.end());
    AboxResult r = Abox(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::string(absl::StripAsciiWhitespace(r.out));
  }

  // `sh -c SCRIPT` in sandbox `id`: its stdout, trimmed (a failure is reported).
  std::string Sh(const std::string& id, const std::string& script) {
    AboxResult r = Abox({"exec", id, "--", "sh", "-c", script});
    EXPECT_EQ(r.exit_code, 0) << script << ": " << r.err;
    return std::string(absl::StripAsciiWhitespace(r.out));
  }

  // A background process that keeps counting in /tmp/count (it outlives the exec that started
  // it), once it has counted at least once.
  void StartCounter(const std::string& id) {
    Sh(id,
       "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done' "
       ">/dev/null 2>&1 &");
    Sh(id, "while [ ! -s /tmp/count ]; do sleep 0.05; done");
  }

  int Count(const std::string& id) {
    int n = -1;
    EXPECT_TRUE(absl::SimpleAtoi(Sh(id, "cat /tmp/count"), &n));
    return n;
  }

  // The payloads of the "ready" events seen so far, by sandbox id (read until `last_id`'s shows).
  std::map<std::string, nlohmann::json> ReadyEvents(const std::string& last_id) {
    AboxCall events;
    events.args = {"events", "--since", "0", "--json"};
    events.env = home_.Env();
    events.when_output = last_id;
    events.on_output = [](pid_t pid) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::kill(pid, SIGINT);
    };
    events.timeout_seconds = 30;
    AboxResult seen = RunAbox(events);
    std::map<std::string, nlohmann::json> ready;
    for (absl::string_view line : absl::StrSplit(seen.out, '\n', absl::SkipEmpty())) {
      nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
      if (e.is_object() && e.value("type", "") == "ready") {
        ready[e.value("sandbox_id", "")] = e["payload"];
      }
    }
    return ready;
  }

  DaemonHome home_;
};

}  // namespace abox::testing
