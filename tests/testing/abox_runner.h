// Runs the real `abox` binary for end-to-end tests and collects what a user would see.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/base/child_process.h"

namespace abox::testing {

struct AboxResult {
  int exit_code = -1;  // shell convention (128+N for signal N)
  std::string out;
  std::string err;
  uint64_t peak_rss_kib = 0;  // highest VmRSS of the abox process seen while it ran
};

struct AboxCall {
  std::vector<std::string> args;  // after "abox"
  std::string stdin_data;
  bool close_stdin = true;
  // Extra environment (on top of the test's own); a value of "" removes the variable.
  std::map<std::string, std::string> env;
  // If set, stdout is counted (out stays empty) instead of kept: for huge outputs.
  bool count_stdout_only = false;
  uint64_t* stdout_bytes = nullptr;
  // Called once with the pid after abox started and its stdout first produced `when_output`.
  std::string when_output;
  std::function<void(pid_t)> on_output;
  int timeout_seconds = 300;
};

// Path of the abox binary under test (set by CMake through ABOX_BIN).
std::string AboxBin();

// Runs abox and waits for it. Samples its RSS every ~50 ms.
AboxResult RunAbox(const AboxCall& call);

// Processes whose command line contains `needle` (excluding this test process).
std::vector<pid_t> ProcessesMatching(const std::string& needle);

// The direct children of `parent` (from /proc/<pid>/stat).
std::vector<pid_t> ChildrenOf(pid_t parent);

// `abox exec` arguments that run `script` with sh in sandbox `id` (as root with `root`) and
// print "exit=N" after it, so a test reads the script's status from its output.
std::vector<std::string> GuestShellArgs(const std::string& id, const std::string& script,
                                        bool root = false);

// Files and directories under `dir` (recursively), relative paths.
std::vector<std::string> ListTree(const std::string& dir);

// An e2e test's teardown through the CLI: `abox rm -f` of every sandbox `abox ls -a -q` lists,
// each run by `abox` (the fixture's own way of running the CLI, with its environment).
void RemoveAllSandboxes(const std::function<AboxResult(std::vector<std::string>)>& abox);

// $ABOX_HOME as abox resolves it (the tests run abox with the same environment).
std::string AboxHome();

// The home whose images/ every test home links to ($ABOX_E2E_SHARED_HOME, set by e2e_main;
// else AboxHome()). Images a test builds go there, under a lock (see BuildSharedImage).
std::string SharedAboxHome();

// `abox image build ARGS...` into SharedAboxHome(), serialized across test processes by a lock
// file there, so parallel tests build an image once and the others find it up to date.
AboxResult BuildSharedImage(const std::vector<std::string>& args);

// The pid of the process listening on the unix socket at `path` (SO_PEERCRED), or -1.
pid_t ListenerPid(const std::string& path);

// Waits up to 20 s for every VM process and every file under $ABOX_HOME/sandboxes to be gone,
// and fails the test with what is left otherwise.
void ExpectNoLeftovers();

}  // namespace abox::testing
