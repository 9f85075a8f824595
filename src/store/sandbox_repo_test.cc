#include "src/store/sandbox_repo.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/store/test_util.h"

namespace abox::store {
namespace {

using ::testing::ElementsAre;
using testing::ExecOrDie;
using testing::FakeClock;
using ::testing::HasSubstr;
using testing::TempDir;

SandboxRecord Sandbox(const std::string& id, const std::string& name = "") {
  SandboxRecord s;
  s.id = id;
  s.name = name;
  s.image = "default";
  s.run_dir = "/home/u/.local/share/abox/sandboxes/" + id;
  return s;
}

std::vector<std::string> Ids(const std::vector<SandboxRecord>& sandboxes) {
  std::vector<std::string> ids;
  ids.reserve(sandboxes.size());
  for (const auto& s : sandboxes) {
    ids.push_back(s.id);
  }
  return ids;
}

class SandboxRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = testing::OpenStateOrDie(tmp_.file("state.db"));
    ASSERT_NE(db_, nullptr);
    repo_ = std::make_unique<SandboxRepo>(*db_, clock_.AsClock());
  }

  // Inserts and returns the stored record, advancing the clock so created_at orders them.
  SandboxRecord Add(const SandboxRecord& sandbox) {
    auto stored = repo_->Insert(sandbox);
    EXPECT_TRUE(stored.ok()) << stored.status();
    clock_.Advance(absl::Seconds(1));
    return stored.ok() ? *stored : SandboxRecord();
  }

  TempDir tmp_;
  FakeClock clock_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<SandboxRepo> repo_;
};

TEST_F(SandboxRepoTest, RoundTripsEveryField) {
  SandboxRecord s = Sandbox("0123456789ab", "résumé-沙箱-🚀");
  s.image = "debian-12";
  s.cpus = 4;
  s.memory_mib = 2048;
  s.labels = {{"team", "ünïcode"}, {"a.b", "dotted"}, {"quote\"key", "it's"}, {"empty", ""}};
  s.state = SandboxState::kReady;
  s.failure = "none yet";
  s.ready_at = absl::FromUnixMillis(1'600'000'000'001);
  s.ttl_seconds = 3600;
  s.idle_timeout_seconds = 600;
  s.last_active_at = absl::FromUnixMillis(1'600'000'000'002);
  s.vmm_pid = 4242;
  s.accel = "kvm";
  s.created_at = absl::UnixEpoch();  // ignored: Insert stamps it

  auto stored = repo_->Insert(s);
  ASSERT_TRUE(stored.ok()) << stored.status();
  SandboxRecord want = s;
  want.created_at = clock_.now();
  EXPECT_EQ(*stored, want);
  auto got = repo_->Get(s.id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, want);
}

TEST_F(SandboxRepoTest, DefaultsRoundTripAsUnset) {
  SandboxRecord stored = Add(Sandbox("0123456789ab"));
  auto got = repo_->Get("0123456789ab");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, stored);
  EXPECT_EQ(got->name, "");
  EXPECT_TRUE(got->labels.empty());
  EXPECT_EQ(got->ready_at, std::nullopt);
  EXPECT_EQ(got->last_active_at, std::nullopt);
  EXPECT_EQ(got->vmm_pid, 0);
  EXPECT_EQ(got->state, SandboxState::kCreating);
}

TEST_F(SandboxRepoTest, InsertRejectsMalformedIds) {
  for (const char* id : {"", "0123456789a", "0123456789abc", "0123456789AB", "0123456789ag"}) {
    auto stored = repo_->Insert(Sandbox(id));
    EXPECT_EQ(stored.status().code(), absl::StatusCode::kInvalidArgument) << id;
  }
}

TEST_F(SandboxRepoTest, InsertRejectsInvalidResources) {
  SandboxRecord s = Sandbox("0123456789ab");
  s.cpus = 0;
  auto stored = repo_->Insert(s);
  EXPECT_EQ(stored.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(stored.status().message(), HasSubstr("cpus > 0"));
}

TEST_F(SandboxRepoTest, DuplicateIdOrNameIsAlreadyExistsNamingTheHolder) {
  Add(Sandbox("0123456789ab", "web"));
  auto same_id = repo_->Insert(Sandbox("0123456789ab", "other"));
  EXPECT_EQ(same_id.status().code(), absl::StatusCode::kAlreadyExists);
  auto same_name = repo_->Insert(Sandbox("ba9876543210", "web"));
  EXPECT_EQ(same_name.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(same_name.status().message(),
              HasSubstr("the name 'web' is taken by sandbox 0123456789ab"));
  // Unnamed sandboxes do not collide with each other.
  Add(Sandbox("aaaaaaaaaaaa"));
  Add(Sandbox("bbbbbbbbbbbb"));
  EXPECT_EQ(repo_->List({})->size(), 3u);
}

TEST_F(SandboxRepoTest, GetUnknownIsNotFound) {
  auto got = repo_->Get("0123456789ab");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(got.status().message(), "no sandbox '0123456789ab'");
}

TEST_F(SandboxRepoTest, ResolvesIdNameAndUniquePrefix) {
  Add(Sandbox("abc111111111", "alpha"));
  Add(Sandbox("abc222222222", "βeta"));
  Add(Sandbox("def333333333"));
  EXPECT_EQ(repo_->Resolve("abc111111111")->id, "abc111111111");
  EXPECT_EQ(repo_->Resolve("alpha")->id, "abc111111111");
  EXPECT_EQ(repo_->Resolve("βeta")->id, "abc222222222");
  EXPECT_EQ(repo_->Resolve("abc1")->id, "abc111111111");
  EXPECT_EQ(repo_->Resolve("def")->id, "def333333333");
}

TEST_F(SandboxRepoTest, ResolveAmbiguousPrefixListsCandidates) {
  Add(Sandbox("abc111111111", "alpha"));
  Add(Sandbox("abc222222222"));
  auto got = repo_->Resolve("abc");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(got.status().message(), HasSubstr("'abc' is ambiguous"));
  EXPECT_THAT(got.status().message(), HasSubstr("abc111111111 (alpha), abc222222222"));
}

TEST_F(SandboxRepoTest, ResolveMissingOrTooShortIsNotFound) {
  Add(Sandbox("abc111111111"));
  auto missing = repo_->Resolve("zzz");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "no sandbox 'zzz'");
  // Two characters are too few to count as a prefix.
  EXPECT_EQ(repo_->Resolve("ab").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repo_->Resolve("abd").status().code(), absl::StatusCode::kNotFound);
  // Prefixes are matched literally: no LIKE / GLOB wildcards.
  EXPECT_EQ(repo_->Resolve("ab%").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repo_->Resolve("ab*").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repo_->Resolve("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SandboxRepoTest, ResolvePrefersAnExactNameOverAPrefix) {
  Add(Sandbox("abc111111111"));
  Add(Sandbox("def222222222", "abc"));
  EXPECT_EQ(repo_->Resolve("abc")->id, "def222222222");
}

TEST_F(SandboxRepoTest, ListIsNewestFirstAndFiltersByLabelsAndState) {
  SandboxRecord a = Sandbox("aaaaaaaaaaaa");
  a.labels = {{"team", "web"}, {"env", "dev"}};
  SandboxRecord b = Sandbox("bbbbbbbbbbbb");
  b.labels = {{"team", "web"}, {"env", "prod"}};
  b.state = SandboxState::kReady;
  SandboxRecord c = Sandbox("cccccccccccc");
  c.labels = {{"odd key.with \"chars\"", "v"}};
  c.state = SandboxState::kReady;
  Add(a);
  Add(b);
  Add(c);

  EXPECT_THAT(Ids(*repo_->List({})), ElementsAre("cccccccccccc", "bbbbbbbbbbbb", "aaaaaaaaaaaa"));
  EXPECT_THAT(Ids(*repo_->List({.labels = {{"team", "web"}}})),
              ElementsAre("bbbbbbbbbbbb", "aaaaaaaaaaaa"));
  EXPECT_THAT(Ids(*repo_->List({.labels = {{"team", "web"}, {"env", "dev"}}})),
              ElementsAre("aaaaaaaaaaaa"));
  EXPECT_THAT(Ids(*repo_->List({.labels = {{"team", "web"}, {"env", "qa"}}})), ElementsAre());
  EXPECT_THAT(Ids(*repo_->List({.labels = {{"odd key.with \"chars\"", "v"}}})),
              ElementsAre("cccccccccccc"));
  EXPECT_THAT(Ids(*repo_->List({.states = {SandboxState::kReady}})),
              ElementsAre("cccccccccccc", "bbbbbbbbbbbb"));
  EXPECT_THAT(Ids(*repo_->List({.labels = {{"team", "web"}}, .states = {SandboxState::kReady}})),
              ElementsAre("bbbbbbbbbbbb"));
  EXPECT_THAT(Ids(*repo_->List({.states = {SandboxState::kCreating, SandboxState::kFailed}})),
              ElementsAre("aaaaaaaaaaaa"));
}

TEST_F(SandboxRepoTest, TransitionStateChangesOnlyFromTheExpectedState) {
  Add(Sandbox("0123456789ab"));  // creating
  absl::Time ready_time = clock_.now();
  ASSERT_TRUE(
      repo_->TransitionState("0123456789ab", SandboxState::kCreating, SandboxState::kReady).ok());
  EXPECT_EQ(repo_->Get("0123456789ab")->ready_at, ready_time);
  // A second transition from "creating" lost the race: refused, naming the state it is in.
  absl::Status late =
      repo_->TransitionState("0123456789ab", SandboxState::kCreating, SandboxState::kFailed, "x");
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(late.message(), "sandbox 0123456789ab is ready, not creating");
  EXPECT_EQ(repo_->Get("0123456789ab")->state, SandboxState::kReady);
  EXPECT_EQ(repo_->Get("0123456789ab")->failure, "");
  EXPECT_EQ(
      repo_->TransitionState("bbbbbbbbbbbb", SandboxState::kReady, SandboxState::kStopping).code(),
      absl::StatusCode::kNotFound);
  ASSERT_TRUE(repo_
                  ->TransitionState("0123456789ab", SandboxState::kReady, SandboxState::kFailed,
                                    "the VM died")
                  .ok());
  EXPECT_EQ(repo_->Get("0123456789ab")->failure, "the VM died");
}

TEST_F(SandboxRepoTest, UpdateStateRecordsReadinessAndFailure) {
  Add(Sandbox("0123456789ab"));
  absl::Time ready_time = clock_.now();
  ASSERT_TRUE(repo_->UpdateState("0123456789ab", SandboxState::kReady).ok());
  auto got = repo_->Get("0123456789ab");
  EXPECT_EQ(got->state, SandboxState::kReady);
  EXPECT_EQ(got->ready_at, ready_time);
  EXPECT_EQ(got->last_active_at, ready_time);

  clock_.Advance(absl::Minutes(5));
  ASSERT_TRUE(
      repo_->UpdateState("0123456789ab", SandboxState::kFailed, "QEMU exited: killed by signal 9")
          .ok());
  got = repo_->Get("0123456789ab");
  EXPECT_EQ(got->state, SandboxState::kFailed);
  EXPECT_EQ(got->failure, "QEMU exited: killed by signal 9");
  EXPECT_EQ(got->ready_at, ready_time);  // unchanged

  clock_.Advance(absl::Minutes(5));
  ASSERT_TRUE(repo_->UpdateState("0123456789ab", SandboxState::kReady).ok());
  got = repo_->Get("0123456789ab");
  EXPECT_EQ(got->ready_at, ready_time);          // the first time only
  EXPECT_EQ(got->last_active_at, clock_.now());  // but readiness counts as activity
  EXPECT_EQ(got->failure, "");

  absl::Status missing = repo_->UpdateState("ffffffffffff", SandboxState::kReady);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "no sandbox 'ffffffffffff'");
}

TEST_F(SandboxRepoTest, SetVmAndTouch) {
  Add(Sandbox("0123456789ab"));
  ASSERT_TRUE(repo_->SetVm("0123456789ab", 31337, "tcg").ok());
  ASSERT_TRUE(repo_->Touch("0123456789ab").ok());
  auto got = repo_->Get("0123456789ab");
  EXPECT_EQ(got->vmm_pid, 31337);
  EXPECT_EQ(got->accel, "tcg");
  EXPECT_EQ(got->last_active_at, clock_.now());
  EXPECT_EQ(repo_->SetVm("ffffffffffff", 1, "kvm").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repo_->Touch("ffffffffffff").code(), absl::StatusCode::kNotFound);
}

TEST_F(SandboxRepoTest, DeleteRemovesTheRow) {
  Add(Sandbox("0123456789ab", "gone"));
  ASSERT_TRUE(repo_->Delete("0123456789ab").ok());
  EXPECT_EQ(repo_->Get("0123456789ab").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(repo_->Delete("0123456789ab").code(), absl::StatusCode::kNotFound);
  // The name is free again.
  Add(Sandbox("ba9876543210", "gone"));
}

TEST_F(SandboxRepoTest, ExpiredFindsTtlAndIdleTimeouts) {
  const absl::Time start = clock_.now();
  SandboxRecord ttl = Sandbox("aaaaaaaaaaaa");
  ttl.ttl_seconds = 60;
  SandboxRecord idle = Sandbox("bbbbbbbbbbbb");
  idle.idle_timeout_seconds = 30;
  SandboxRecord forever = Sandbox("cccccccccccc");
  SandboxRecord stopped = Sandbox("dddddddddddd");
  stopped.ttl_seconds = 1;
  stopped.state = SandboxState::kStopped;
  SandboxRecord idle_booting = Sandbox("eeeeeeeeeeee");
  idle_booting.idle_timeout_seconds = 1;  // not ready yet: idle time does not count
  for (const auto& s : {ttl, idle, forever, stopped, idle_booting}) {
    ASSERT_TRUE(repo_->Insert(s).ok());
  }
  ASSERT_TRUE(repo_->UpdateState("aaaaaaaaaaaa", SandboxState::kReady).ok());
  ASSERT_TRUE(repo_->UpdateState("bbbbbbbbbbbb", SandboxState::kReady).ok());
  ASSERT_TRUE(repo_->UpdateState("cccccccccccc", SandboxState::kReady).ok());

  EXPECT_TRUE(repo_->Expired(start + absl::Seconds(29))->empty());
  clock_.Advance(absl::Seconds(20));
  ASSERT_TRUE(repo_->Touch("bbbbbbbbbbbb").ok());  // idle clock restarts at +20s
  EXPECT_TRUE(repo_->Expired(start + absl::Seconds(49))->empty());

  auto at50 = repo_->Expired(start + absl::Seconds(50));
  ASSERT_TRUE(at50.ok()) << at50.status();
  ASSERT_EQ(at50->size(), 1u);
  EXPECT_EQ((*at50)[0].sandbox.id, "bbbbbbbbbbbb");
  EXPECT_EQ((*at50)[0].reason, ExpiryReason::kIdle);

  auto at60 = repo_->Expired(start + absl::Seconds(60));
  ASSERT_EQ(at60->size(), 2u);
  EXPECT_EQ((*at60)[0].sandbox.id, "aaaaaaaaaaaa");
  EXPECT_EQ((*at60)[0].reason, ExpiryReason::kTtl);
  EXPECT_EQ((*at60)[1].sandbox.id, "bbbbbbbbbbbb");

  // Once it is stopping, a sandbox is no longer reported.
  ASSERT_TRUE(repo_->UpdateState("aaaaaaaaaaaa", SandboxState::kStopping).ok());
  EXPECT_EQ(repo_->Expired(start + absl::Seconds(60))->size(), 1u);
}

TEST_F(SandboxRepoTest, TtlCountsWhilePausedIdleTimeDoesNot) {
  const absl::Time start = clock_.now();
  SandboxRecord ttl = Sandbox("aaaaaaaaaaaa");
  ttl.ttl_seconds = 60;
  SandboxRecord idle = Sandbox("bbbbbbbbbbbb");
  idle.idle_timeout_seconds = 30;  // paused because it was idle: it stays paused
  for (const auto& s : {ttl, idle}) {
    ASSERT_TRUE(repo_->Insert(s).ok());
    ASSERT_TRUE(repo_->UpdateState(s.id, SandboxState::kReady).ok());
    ASSERT_TRUE(repo_->UpdateState(s.id, SandboxState::kPaused).ok());
  }
  EXPECT_TRUE(repo_->Expired(start + absl::Seconds(59))->empty());
  auto at60 = repo_->Expired(start + absl::Seconds(60));
  ASSERT_TRUE(at60.ok()) << at60.status();
  ASSERT_EQ(at60->size(), 1u);
  EXPECT_EQ((*at60)[0].sandbox.id, "aaaaaaaaaaaa");
  EXPECT_EQ((*at60)[0].reason, ExpiryReason::kTtl);
}

TEST_F(SandboxRepoTest, TtlCountsWhileCreating) {
  SandboxRecord s = Sandbox("0123456789ab");
  s.ttl_seconds = 10;
  ASSERT_TRUE(repo_->Insert(s).ok());
  auto due = repo_->Expired(clock_.now() + absl::Seconds(10));
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].reason, ExpiryReason::kTtl);
}

TEST_F(SandboxRepoTest, DamagedRowsAreDataLoss) {
  Add(Sandbox("0123456789ab"));
  ExecOrDie(*db_, "UPDATE sandboxes SET labels = '{\"n\": 1}'");
  auto got = repo_->Get("0123456789ab");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("sandboxes.labels"));
  EXPECT_EQ(repo_->List({}).status().code(), absl::StatusCode::kDataLoss);
}

TEST(SandboxStateTest, NamesRoundTrip) {
  for (SandboxState state :
       {SandboxState::kCreating, SandboxState::kReady, SandboxState::kStopping,
        SandboxState::kStopped, SandboxState::kFailed, SandboxState::kRemoved}) {
    EXPECT_EQ(*ParseSandboxState(SandboxStateName(state)), state);
  }
  EXPECT_EQ(ParseSandboxState("Ready").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SandboxRepoSharingTest, TwoDatabaseHandlesSeeEachOthersWrites) {
  TempDir tmp;
  auto first_db = testing::OpenStateOrDie(tmp.file("state.db"));
  auto second_db = testing::OpenStateOrDie(tmp.file("state.db"));
  ASSERT_NE(first_db, nullptr);
  ASSERT_NE(second_db, nullptr);
  SandboxRepo first(*first_db);
  SandboxRepo second(*second_db);
  ASSERT_TRUE(first.Insert(Sandbox("0123456789ab", "shared")).ok());
  EXPECT_EQ(second.Resolve("shared")->id, "0123456789ab");
  ASSERT_TRUE(second.UpdateState("0123456789ab", SandboxState::kReady).ok());
  EXPECT_EQ(first.Get("0123456789ab")->state, SandboxState::kReady);
  ASSERT_TRUE(first.Delete("0123456789ab").ok());
  EXPECT_EQ(second.Get("0123456789ab").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace abox::store
