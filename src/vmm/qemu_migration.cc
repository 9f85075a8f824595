#include "src/vmm/qemu_migration.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/base/status_macros.h"

namespace abox::vmm {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using std::chrono::milliseconds;

constexpr char kStateFdName[] = "abox-state";
constexpr milliseconds kCommandTimeout(5000);
constexpr milliseconds kPollEvery(2);
// The default bandwidth cap made a 95 MB save take 0.7 s; a paused VM's state goes in one pass
// to a local file, so there is nothing to protect.
constexpr int64_t kMaxBandwidth = int64_t{1} << 40;

milliseconds Left(Clock::time_point deadline) {
  return std::max(milliseconds(1),
                  std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

absl::Status SetIgnoreShared(QmpClient& qmp, bool on, Clock::time_point deadline) {
  json caps = {{"capabilities", json::array({{{"capability", "x-ignore-shared"}, {"state", on}}})}};
  return qmp.Execute("migrate-set-capabilities", caps, std::min(kCommandTimeout, Left(deadline)))
      .status();
}

// The "status" string of a QMP reply object, or "" when it has none.
std::string StatusOf(const json& reply) {
  auto it = reply.find("status");
  return it != reply.end() && it->is_string() ? it->get<std::string>() : "";
}

// QEMU's own words on a failed migration (untrusted text: bounded by the QMP client).
std::string ErrorOf(const json& reply) {
  auto it = reply.find("error-desc");
  return it != reply.end() && it->is_string() ? it->get<std::string>() : "no reason given";
}

}  // namespace

absl::Status PauseVm(QmpClient& qmp, milliseconds timeout) {
  return qmp.Execute("stop", nullptr, timeout).status();
}

absl::Status ResumeVm(QmpClient& qmp, milliseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  // A save still under way (its host died in the middle: QEMU holds the state file and goes on)
  // would stop the VM again when it completes: it is cancelled and waited out first. After a
  // save that completed, both are no-ops.
  ABOX_RETURN_IF_ERROR(qmp.Execute("migrate_cancel", nullptr, Left(deadline)).status());
  for (;;) {
    ABOX_ASSIGN_OR_RETURN(json info, qmp.Execute("query-migrate", nullptr, Left(deadline)));
    std::string st = StatusOf(info);
    if (st != "setup" && st != "active" && st != "cancelling" && st != "device" &&
        st != "pre-switchover") {
      break;
    }
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError("a save in progress did not end in time");
    }
    std::this_thread::sleep_for(kPollEvery);
  }
  return qmp.Execute("cont", nullptr, Left(deadline)).status();
}

absl::Status SaveVmState(QmpClient& qmp, int fd, bool skip_shared_memory, milliseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  ABOX_ASSIGN_OR_RETURN(json status, qmp.Execute("query-status", nullptr, kCommandTimeout));
  if (std::string run = StatusOf(status); run != "paused" && run != "postmigrate") {
    return absl::FailedPreconditionError(
        absl::StrCat("the VM must be paused to save its state (it is ", run, ")"));
  }
  ABOX_RETURN_IF_ERROR(SetIgnoreShared(qmp, skip_shared_memory, deadline));
  ABOX_RETURN_IF_ERROR(qmp.Execute("migrate-set-parameters", json{{"max-bandwidth", kMaxBandwidth}},
                                   std::min(kCommandTimeout, Left(deadline)))
                           .status());
  ABOX_RETURN_IF_ERROR(qmp.SendFd(kStateFdName, fd, std::min(kCommandTimeout, Left(deadline))));
  ABOX_RETURN_IF_ERROR(qmp.Execute("migrate", json{{"uri", absl::StrCat("fd:", kStateFdName)}},
                                   std::min(kCommandTimeout, Left(deadline)))
                           .status());
  for (;;) {
    ABOX_ASSIGN_OR_RETURN(json info, qmp.Execute("query-migrate", nullptr,
                                                 std::min(kCommandTimeout, Left(deadline))));
    std::string st = StatusOf(info);
    if (st == "completed") {
      return absl::OkStatus();
    }
    if (st == "failed" || st == "cancelled") {
      return absl::InternalError(absl::StrCat("saving the VM's state failed: ", ErrorOf(info)));
    }
    if (Clock::now() >= deadline) {
      (void)qmp.Execute("migrate_cancel", nullptr, kCommandTimeout);
      return absl::DeadlineExceededError(
          absl::StrCat("saving the VM's state took longer than ", timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(kPollEvery);
  }
}

absl::Status LoadVmState(QmpClient& qmp, int fd, bool skip_shared_memory, milliseconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  ABOX_RETURN_IF_ERROR(SetIgnoreShared(qmp, skip_shared_memory, deadline));
  ABOX_RETURN_IF_ERROR(qmp.SendFd(kStateFdName, fd, std::min(kCommandTimeout, Left(deadline))));
  ABOX_RETURN_IF_ERROR(qmp.Execute("migrate-incoming",
                                   json{{"uri", absl::StrCat("fd:", kStateFdName)}},
                                   std::min(kCommandTimeout, Left(deadline)))
                           .status());
  for (;;) {
    // QEMU exits when the state does not load (the caller reports its log); once loaded it
    // starts the VM by itself. While it reads the state its monitor may not answer for a while
    // (many restores at once on a busy host): that is loading, up to the overall deadline.
    absl::StatusOr<json> status =
        qmp.Execute("query-status", nullptr, std::min(kCommandTimeout, Left(deadline)));
    if (!status.ok() && absl::IsDeadlineExceeded(status.status()) && Clock::now() < deadline) {
      continue;
    }
    ABOX_RETURN_IF_ERROR(status.status());
    std::string run = StatusOf(*status);
    if (run == "running") {
      return absl::OkStatus();
    }
    if (run == "paused") {
      // Loaded but not started (QEMU autostarts unless told otherwise): start it.
      ABOX_ASSIGN_OR_RETURN(json info, qmp.Execute("query-migrate", nullptr,
                                                   std::min(kCommandTimeout, Left(deadline))));
      if (StatusOf(info) == "completed") {
        return ResumeVm(qmp, std::min(kCommandTimeout, Left(deadline)));
      }
    }
    if (run != "inmigrate" && run != "prelaunch" && run != "paused" && run != "restore-vm") {
      return absl::InternalError(
          absl::StrCat("the VM did not come back from its saved state (it is ", run, ")"));
    }
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("loading the VM's state took longer than ", timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(kPollEvery);
  }
}

}  // namespace abox::vmm
