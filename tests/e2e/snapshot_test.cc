// Golden snapshots, checkpoint / restore and fork with real VMs (issue 13): clones restored from
// one template each get their own identity (RNG, hostname, machine-id, clock); a checkpoint
// brings back processes and files; forks are independent; bad checkpoints fail cleanly; pause to
// disk and resume. Faults in the middle of that work: snapshot_fault_test.cc.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/abox_runner.h"
#include "tests/testing/aboxd_process.h"
#include "tests/testing/cli_home_test.h"

namespace abox::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// What a guest says about itself, in one exec.
constexpr char kIdentityProbe[] =
    "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; hostname; cat /etc/machine-id; "
    "cat /run/abox/sandbox-id; date +%s.%N";

struct Probe {
  std::string random;
  std::string hostname;
  std::string machine_id;
  std::string sandbox_id;
  double clock = 0;
};

class SnapshotTest : public CliHomeTest {
 protected:
  // The probe, with the host's clock read around it: `before` <= guest clock <= `after`.
  Probe Identity(const std::string& id, double* before, double* after) {
    *before = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
    std::string out = Sh(id, kIdentityProbe);
    *after = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
    std::vector<std::string> lines = absl::StrSplit(out, '\n');
    Probe p;
    if (lines.size() != 5) {
      ADD_FAILURE() << "probe said: " << out;
      return p;
    }
    p.random = lines[0];
    p.hostname = lines[1];
    p.machine_id = lines[2];
    p.sandbox_id = lines[3];
    EXPECT_TRUE(absl::SimpleAtod(lines[4], &p.clock)) << lines[4];
    return p;
  }
};

TEST_F(SnapshotTest, ClonesOfTheGoldenSnapshotEachGetTheirOwnIdentity) {
  std::string a = Create();
  std::string b = Create();
  std::string cold = Create({"--cold"});
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_FALSE(cold.empty());

  std::map<std::string, nlohmann::json> ready = ReadyEvents(cold);
  EXPECT_EQ(ready[a].value("started_from", ""), "snapshot") << ready[a];
  EXPECT_EQ(ready[b].value("started_from", ""), "snapshot") << ready[b];
  EXPECT_EQ(ready[cold].value("started_from", ""), "boot") << ready[cold];

  std::map<std::string, Probe> probes;
  for (const std::string& id : {a, b, cold}) {
    double before = 0;
    double after = 0;
    Probe p = Identity(id, &before, &after);
    EXPECT_EQ(p.random.size(), 64u) << id;
    EXPECT_EQ(p.hostname, absl::StrCat("abox-", id));
    EXPECT_EQ(p.sandbox_id, id);
    EXPECT_EQ(p.machine_id.size(), 32u);
    // The guest's clock is the host's (within 1 s), not the template's.
    EXPECT_GT(p.clock, before - 1.0) << id;
    EXPECT_LT(p.clock, after + 1.0) << id;
    probes[id] = p;
  }
  // Two clones of one memory image never produce the same random bytes or ids.
  EXPECT_NE(probes[a].random, probes[b].random);
  EXPECT_NE(probes[a].random, probes[cold].random);
  EXPECT_NE(probes[a].machine_id, probes[b].machine_id);

  // A clone's writes are its own: the other clone and the template do not see them.
  Sh(a, "echo only-a > $HOME/mine");
  EXPECT_EQ(Sh(b, "cat $HOME/mine 2>/dev/null || echo absent"), "absent");
  std::string c = Create();
  EXPECT_EQ(Sh(c, "cat $HOME/mine 2>/dev/null || echo absent"), "absent");
}

TEST_F(SnapshotTest, CheckpointAndRestoreBringBackProcessesAndFiles) {
  std::string id = Create();
  ASSERT_FALSE(id.empty());
  StartCounter(id);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  AboxResult ck = Abox({"checkpoint", id, "--name", "before", "--json"});
  ASSERT_EQ(ck.exit_code, 0) << ck.err;
  nlohmann::json checkpoint = nlohmann::json::parse(ck.out);
  EXPECT_EQ(checkpoint["name"], "before");
  EXPECT_GT(checkpoint["bytes"].get<int64_t>(), 0);
  int at_checkpoint = Count(id);

  Sh(id, "echo later > $HOME/after.txt");
  std::this_thread::sleep_for(std::chrono::seconds(3));
  int before_restore = Count(id);
  EXPECT_GT(before_restore, at_checkpoint);

  AboxResult restored = Abox({"restore", id, "before"});
  ASSERT_EQ(restored.exit_code, 0) << restored.err;
  // Files are as they were: the one written after the checkpoint is gone.
  EXPECT_EQ(Sh(id, "cat $HOME/after.txt 2>/dev/null || echo absent"), "absent");
  // The counter is back near where it was and keeps counting.
  int after_restore = Count(id);
  EXPECT_LT(after_restore, before_restore);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_GT(Count(id), after_restore);
  // The clock is now, not the checkpoint's (taken seconds earlier).
  double before = 0;
  double after = 0;
  Probe p = Identity(id, &before, &after);
  EXPECT_GT(p.clock, before - 1.0);
  EXPECT_LT(p.clock, after + 1.0);

  AboxResult listed = Abox({"checkpoint", "ls", id});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("before"));

  // Bad input: an unknown checkpoint, then a damaged one. Each fails with a clear error and the
  // sandbox goes on as it was (its counter still counts).
  AboxResult unknown = Abox({"restore", id, "no-such"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.err, HasSubstr("no checkpoint \"no-such\""));
  AboxResult ck2 = Abox({"checkpoint", id, "--name", "damaged", "--json"});
  ASSERT_EQ(ck2.exit_code, 0) << ck2.err;
  std::string ck2_id = nlohmann::json::parse(ck2.out)["id"];
  fs::path state = fs::path(home_.path()) / "checkpoints" / id / ck2_id / "state";
  ASSERT_TRUE(fs::exists(state));
  fs::permissions(state, fs::perms::owner_write, fs::perm_options::add);
  fs::resize_file(state, fs::file_size(state) / 3);
  AboxResult broken = Abox({"restore", id, "damaged"});
  EXPECT_NE(broken.exit_code, 0);
  EXPECT_THAT(broken.err, HasSubstr("could not be restored"));
  int still = Count(id);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_GT(Count(id), still);
  EXPECT_THAT(Abox({"inspect", "--json", id}).out, HasSubstr("\"ready\""));

  // The sandbox runs on the disk of the checkpoint it was restored from: that one is kept.
  EXPECT_EQ(Abox({"checkpoint", "rm", id, "damaged"}).exit_code, 0);
  AboxResult in_use = Abox({"checkpoint", "rm", id, "before"});
  EXPECT_NE(in_use.exit_code, 0);
  EXPECT_THAT(in_use.err, HasSubstr("is in use"));
  AboxResult left = Abox({"checkpoint", "ls", id});
  EXPECT_THAT(left.out, HasSubstr("before"));
  EXPECT_THAT(left.out, Not(HasSubstr("damaged")));
}

TEST_F(SnapshotTest, ForksAreIndependentFromTheFirstInstruction) {
  std::string id = Create();
  ASSERT_FALSE(id.empty());
  Sh(id, "echo from-parent > $HOME/shared.txt");
  AboxResult forked = Abox({"fork", id, "-n", "2", "--name", "try", "--json"});
  ASSERT_EQ(forked.exit_code, 0) << forked.err;
  nlohmann::json made = nlohmann::json::parse(forked.out)["sandboxes"];
  ASSERT_EQ(made.size(), 2u);
  std::string f1 = made[0]["id"];
  std::string f2 = made[1]["id"];
  EXPECT_EQ(made[0]["name"], "try-1");
  EXPECT_EQ(made[1]["name"], "try-2");

  // Both start with the parent's files, then write the same path, and each sees its own.
  for (const std::string& f : {f1, f2}) {
    EXPECT_EQ(Sh(f, "cat $HOME/shared.txt"), "from-parent");
    Sh(f, absl::StrCat("echo ", f, " > $HOME/shared.txt"));
  }
  EXPECT_EQ(Sh(f1, "cat $HOME/shared.txt"), f1);
  EXPECT_EQ(Sh(f2, "cat $HOME/shared.txt"), f2);
  EXPECT_EQ(Sh(id, "cat $HOME/shared.txt"), "from-parent");
  // Their own randomness and identity.
  double before = 0;
  double after = 0;
  Probe p1 = Identity(f1, &before, &after);
  Probe p2 = Identity(f2, &before, &after);
  EXPECT_NE(p1.random, p2.random);
  EXPECT_EQ(p1.hostname, absl::StrCat("abox-", f1));
  EXPECT_EQ(p2.hostname, absl::StrCat("abox-", f2));

  // The checkpoint the forks stand on is kept while they run, and goes with the last of them.
  EXPECT_EQ(Abox({"rm", "-f", id}).exit_code, 0);
  EXPECT_FALSE(fs::is_empty(fs::path(home_.path()) / "checkpoints"));
  EXPECT_EQ(Sh(f1, "cat $HOME/shared.txt"), f1);
  EXPECT_EQ(Abox({"rm", "-f", f1, f2}).exit_code, 0);
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(fs::path(home_.path()) / "checkpoints" / id, ec));
}

// Pause to disk: the VM ends and its memory is freed, the processes and files come back with a
// resume (or with the next command), also after aboxd stopped with --pause-on-stop and started
// again; a stop of a paused sandbox drops its saved state.
TEST_F(SnapshotTest, PauseToDiskAndResumeKeepProcessesAcrossAboxdRestarts) {
  std::string id = Create();
  ASSERT_FALSE(id.empty());
  // A TTL passes while a sandbox is paused too (this test lasts longer than 20 s).
  std::string short_lived = Create({"--ttl", "20s"});
  ASSERT_EQ(Abox({"pause", short_lived}).exit_code, 0);
  const absl::Time short_lived_until = absl::Now() + absl::Seconds(20);
  StartCounter(id);
  Sh(id, "echo kept > $HOME/file.txt");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::string run_dirs = (fs::path(home_.path()) / "sandboxes").string() + "/" + id;
  auto state = [&] {
    nlohmann::json j = nlohmann::json::parse(Abox({"inspect", "--json", id}).out, nullptr, false);
    return j.is_object() ? j.value("state", "") : std::string("?");
  };
  // The VM's processes (the shim may take a moment to reap QEMU and exit).
  auto vm_gone = [&] {
    for (int i = 0; i < 100 && !ProcessesMatching(run_dirs).empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return ProcessesMatching(run_dirs).empty();
  };
  auto memory_used = [&] {
    nlohmann::json j =
        nlohmann::json::parse(Abox({"daemon", "status", "--json"}).out, nullptr, false);
    return j.is_object() ? j["health"]["ledger"].value("memory_mib_used", -1) : -1;
  };

  int before_pause = Count(id);
  AboxResult paused = Abox({"pause", id});
  ASSERT_EQ(paused.exit_code, 0) << paused.err;
  EXPECT_EQ(state(), "paused");
  EXPECT_TRUE(vm_gone()) << "the VM of a paused sandbox still runs";
  EXPECT_EQ(memory_used(), 0);  // its capacity is released
  // The saved state is not one of the user's checkpoints.
  EXPECT_THAT(Abox({"checkpoint", "ls", id}).out, HasSubstr("no checkpoints"));
  // Guest work other than a command asks for a resume.
  AboxResult checkpoint = Abox({"checkpoint", id});
  EXPECT_NE(checkpoint.exit_code, 0);
  EXPECT_THAT(checkpoint.err, HasSubstr("abox resume"));

  std::this_thread::sleep_for(std::chrono::seconds(2));
  AboxResult resumed = Abox({"resume", id});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(state(), "ready");
  EXPECT_EQ(Sh(id, "cat $HOME/file.txt"), "kept");
  int after_resume = Count(id);
  EXPECT_GE(after_resume, before_pause);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_GT(Count(id), after_resume) << "the background process did not come back";
  double before = 0;
  double after = 0;
  Probe p = Identity(id, &before, &after);
  EXPECT_GT(p.clock, before - 1.0) << "the guest clock is the pause's";
  EXPECT_LT(p.clock, after + 1.0);

  // aboxd's stop with --pause-on-stop pauses it; a later aboxd (no flag) leaves it paused, and
  // the next command resumes it.
  ASSERT_EQ(Abox({"daemon", "stop"}).exit_code, 0);
  AboxResult started = Abox({"daemon", "start", "--pause-on-stop"});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  EXPECT_EQ(state(), "ready");  // re-attached
  ASSERT_EQ(Abox({"daemon", "stop"}).exit_code, 0);
  EXPECT_TRUE(vm_gone()) << "--pause-on-stop left the VM running";
  ASSERT_EQ(Abox({"daemon", "start"}).exit_code, 0);
  EXPECT_EQ(state(), "paused");
  EXPECT_THAT(Abox({"ls"}).out, HasSubstr("paused"));
  int counted = 0;
  ASSERT_TRUE(absl::SimpleAtoi(Sh(id, "cat /tmp/count"), &counted));  // resumes it
  EXPECT_EQ(state(), "ready");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_GT(Count(id), counted);

  // The third aboxd clones the golden template the first one made: it is not stale because
  // another process calibrated the TSC (the log is every aboxd's of this home, appended).
  std::string other = Create();
  ASSERT_FALSE(other.empty());
  EXPECT_EQ(ReadyEvents(other)[other].value("started_from", ""), "snapshot");
  std::ifstream log_file(fs::path(home_.path()) / "logs" / "aboxd.log");
  std::string log((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
  auto count = [&log](const std::string& what) {
    int n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("is stale"), 0) << log;
  EXPECT_EQ(count(" made in "), 1) << "a restarted aboxd re-made the golden template:\n" << log;
  EXPECT_GE(count(" loaded in "), 1) << log;

  // The paused sandbox whose TTL passed was stopped, and its saved state went.
  absl::SleepFor(std::max(absl::ZeroDuration(), short_lived_until - absl::Now()) +
                 absl::Seconds(3));
  nlohmann::json expired =
      nlohmann::json::parse(Abox({"inspect", "--json", short_lived}).out, nullptr, false);
  EXPECT_EQ(expired.is_object() ? expired.value("state", "") : "?", "stopped") << expired;
  std::error_code gone_ec;
  fs::path short_saved = fs::path(home_.path()) / "checkpoints" / short_lived;
  EXPECT_TRUE(!fs::exists(short_saved, gone_ec) || fs::is_empty(short_saved, gone_ec));

  // A stop of a paused sandbox drops its saved state.
  ASSERT_EQ(Abox({"pause", id}).exit_code, 0);
  ASSERT_EQ(Abox({"stop", id}).exit_code, 0);
  EXPECT_EQ(state(), "stopped");
  std::error_code ec;
  fs::path saved = fs::path(home_.path()) / "checkpoints" / id;
  EXPECT_TRUE(!fs::exists(saved, ec) || fs::is_empty(saved, ec)) << "the saved state stayed";
  AboxResult resume_stopped = Abox({"resume", id});
  EXPECT_NE(resume_stopped.exit_code, 0);
  EXPECT_THAT(resume_stopped.err, HasSubstr("only paused sandboxes are resumed"));
}

}  // namespace
}  // namespace abox::testing
