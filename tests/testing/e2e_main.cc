// main() of the end-to-end tests. Every test process (ctest runs one per test) gets a private
// $ABOX_HOME and aboxd socket, with images/ linked to the shared test image directory, so tests
// run side by side (`ctest -j2 -L e2e`) and each one ends and counts only what it started: the
// VMs, shims and daemons whose command line names its own home.
#include <stdlib.h>

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleMock(&argc, argv);
  // The image directory every test home links to, and where shared images are built.
  std::string shared = abox::testing::AboxHome();
  ::setenv("ABOX_E2E_SHARED_HOME", shared.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  auto home = std::make_unique<abox::testing::DaemonHome>();
  if (home->path().empty()) {
    std::fprintf(stderr, "e2e: cannot create a private ABOX_HOME under /tmp\n");
    return 2;
  }
  for (const auto& [k, v] : home->Env()) {
    ::setenv(k.c_str(), v.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  }
  int rc = RUN_ALL_TESTS();
  home.reset();  // kills what is left of this process's VMs and daemons, removes the home
  return rc;
}
