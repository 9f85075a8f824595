// abox-shim: the per-VM supervisor started by QemuVmm (see shim.h). Not meant to be run by hand.
#include <cstdio>

#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "src/vmm/shim.h"

int main(int argc, char** argv) {
  // stderr is run_dir/shim.log.
  auto logger = spdlog::stderr_logger_st("abox-shim");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l [%P] %v");
  spdlog::set_default_logger(logger);
  absl::StatusOr<abox::vmm::ShimArgs> args = abox::vmm::ParseShimArgs(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "abox-shim: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  return abox::vmm::RunShim(*args);
}
