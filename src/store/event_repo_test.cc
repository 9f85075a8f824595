#include "src/store/event_repo.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/store/retention_counters.h"
#include "src/store/sandbox_repo.h"
#include "src/store/test_util.h"

namespace abox::store {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using testing::ExecOrDie;
using testing::FakeClock;
using ::testing::HasSubstr;
using testing::QueryInt;
using testing::TempDir;

std::vector<int64_t> Seqs(const EventBatch& batch) {
  std::vector<int64_t> seqs;
  seqs.reserve(batch.events.size());
  for (const auto& e : batch.events) {
    seqs.push_back(e.seq);
  }
  return seqs;
}

class EventRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = testing::OpenStateOrDie(tmp_.file("state.db"));
    ASSERT_NE(db_, nullptr);
    MakeRepo(EventRepoOptions());
  }

  void MakeRepo(EventRepoOptions options) {
    repo_ = std::make_unique<EventRepo>(*db_, clock_.AsClock(), options);
  }

  int64_t AppendOrDie(const std::string& type, const json& payload = json::object()) {
    auto seq = repo_->Append("0123456789ab", type, payload);
    EXPECT_TRUE(seq.ok()) << seq.status();
    return seq.ok() ? *seq : -1;
  }

  TempDir tmp_;
  FakeClock clock_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<EventRepo> repo_;
};

TEST_F(EventRepoTest, AppendAndReplayRoundTripEveryField) {
  EXPECT_EQ(*repo_->LastSeq(), 0);
  const json payload = {
      {"image", "default"}, {"cpus", 2}, {"name", "沙箱 🚀"}, {"labels", {{"team", "web"}}}};
  auto first = repo_->Append("0123456789ab", event_type::kCreated, payload);
  ASSERT_TRUE(first.ok()) << first.status();
  const absl::Time created = clock_.now();
  clock_.Advance(absl::Seconds(3));
  auto second = repo_->Append("", "daemon_started", json::object());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*first, 1);
  EXPECT_EQ(*second, 2);
  EXPECT_EQ(*repo_->LastSeq(), 2);

  auto batch = repo_->Since(0, 100);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_FALSE(batch->missed);
  ASSERT_EQ(batch->events.size(), 2u);
  EXPECT_EQ(batch->events[0], (Event{1, created, "0123456789ab", "created", payload}));
  EXPECT_EQ(batch->events[1], (Event{2, clock_.now(), "", "daemon_started", json::object()}));
}

TEST_F(EventRepoTest, SinceStartsAfterTheGivenSeqAndHonoursTheLimit) {
  for (int i = 0; i < 5; ++i) {
    AppendOrDie(event_type::kExecStarted, {{"i", i}});
  }
  EXPECT_THAT(Seqs(*repo_->Since(2, 100)), ElementsAre(3, 4, 5));
  EXPECT_THAT(Seqs(*repo_->Since(0, 2)), ElementsAre(1, 2));
  EXPECT_THAT(Seqs(*repo_->Since(5, 100)), ElementsAre());
  EXPECT_FALSE(repo_->Since(5, 100)->missed);
  EXPECT_EQ(repo_->Since(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EventRepoTest, RetentionKeepsTheNewestAndReportsMissedEvents) {
  MakeRepo({.retain = 3});
  for (int i = 0; i < 7; ++i) {
    AppendOrDie(event_type::kReady);
  }
  EXPECT_EQ(QueryInt(*db_, "SELECT count(*) FROM events"), 3);
  auto all = repo_->Since(0, 100);
  EXPECT_THAT(Seqs(*all), ElementsAre(5, 6, 7));
  EXPECT_TRUE(all->missed);  // 1..4 are gone
  EXPECT_TRUE(repo_->Since(3, 100)->missed);
  auto caught_up = repo_->Since(4, 100);
  EXPECT_THAT(Seqs(*caught_up), ElementsAre(5, 6, 7));
  EXPECT_FALSE(caught_up->missed);
  EXPECT_EQ(*repo_->LastSeq(), 7);
}

// Retention is per sandbox: a sandbox appending without end prunes only its own events (and
// counts them); another sandbox's and the daemon-wide ones stay, and a reader whose position
// fell in the pruned range is told it missed events.
TEST_F(EventRepoTest, OneSandboxsFloodNeverPrunesAnothersOrTheDaemonsEvents) {
  MakeRepo({.retain = 5});
  ASSERT_TRUE(repo_->Append("", "daemon_started", json::object()).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(repo_->Append("ba9876543210", event_type::kReady, json::object()).ok());
  }
  for (int i = 0; i < 100; ++i) {
    AppendOrDie("egress_denied");
  }
  EXPECT_EQ(*repo_->Count("0123456789ab"), 5);
  EXPECT_EQ(*repo_->Count("ba9876543210"), 3);
  EXPECT_EQ(*repo_->Count(""), 1);
  auto all = repo_->Since(0, 100);
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(Seqs(*all), ElementsAre(1, 2, 3, 4, 100, 101, 102, 103, 104));
  EXPECT_TRUE(all->missed);  // 5..99 are gone, though 1..4 are kept
  EXPECT_FALSE(repo_->Since(99, 100)->missed);
  Connection connection = db_->Lock();
  absl::StatusOr<RetentionCounters> counters = ReadRetentionCounters(connection, "0123456789ab");
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ(counters->events_pruned, 95);
  EXPECT_EQ(ReadRetentionCounters(connection, "ba9876543210")->events_pruned, 0);
}

// Events outlive their sandbox, but removed sandboxes together keep only the newest `retain`,
// so creating and removing sandboxes does not grow the table without end.
TEST_F(EventRepoTest, RemovedSandboxesKeepTheNewestEventsTogether) {
  MakeRepo({.retain = 4});
  SandboxRepo sandboxes(*db_, clock_.AsClock());
  SandboxRecord live;
  live.id = "ffffffffffff";
  live.image = "default";
  ASSERT_TRUE(sandboxes.Insert(live).ok());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(repo_->Append(live.id, event_type::kReady, json::object()).ok());
  }
  for (int n = 0; n < 20; ++n) {
    std::string id = absl::StrCat("00000000", absl::Hex(n, absl::kZeroPad4));
    ASSERT_TRUE(repo_->Append(id, event_type::kCreated, json::object()).ok());
    ASSERT_TRUE(repo_->Append(id, event_type::kRemoved, json::object()).ok());
  }
  // The last removed sandbox's 2 events, and the newest 4 of the others'.
  EXPECT_EQ(QueryInt(*db_, "SELECT count(*) FROM events WHERE sandbox_id != 'ffffffffffff'"), 6);
  EXPECT_EQ(*repo_->Count(live.id), 4) << "a live sandbox's events were pruned";
  EXPECT_TRUE(repo_->Since(0, 100)->missed);
  // A late event of a removed sandbox whose events were pruned prunes from the true count.
  ASSERT_TRUE(repo_->Append("000000000000", "egress_denied", json::object()).ok());
  EXPECT_EQ(*repo_->Count("000000000000"), 1);
  EXPECT_EQ(*repo_->Count("000000000013"), 2);
}

TEST_F(EventRepoTest, SeqsAreNeverReusedAcrossRestarts) {
  MakeRepo({.retain = 1});
  AppendOrDie(event_type::kCreated);
  AppendOrDie(event_type::kRemoved);
  repo_.reset();
  db_.reset();
  db_ = testing::OpenStateOrDie(tmp_.file("state.db"));
  ASSERT_NE(db_, nullptr);
  MakeRepo({.retain = 1});
  EXPECT_EQ(*repo_->LastSeq(), 2);
  EXPECT_EQ(AppendOrDie(event_type::kCreated), 3);
}

TEST_F(EventRepoTest, EventsOutliveTheirSandbox) {
  SandboxRepo sandboxes(*db_, clock_.AsClock());
  SandboxRecord s;
  s.id = "0123456789ab";
  s.image = "default";
  ASSERT_TRUE(sandboxes.Insert(s).ok());
  AppendOrDie(event_type::kCreated);
  ASSERT_TRUE(sandboxes.Delete(s.id).ok());
  AppendOrDie(event_type::kRemoved);
  auto batch = repo_->Since(0, 10);
  ASSERT_EQ(batch->events.size(), 2u);
  EXPECT_EQ(batch->events[1].type, "removed");
  EXPECT_EQ(batch->events[1].sandbox_id, "0123456789ab");
}

TEST_F(EventRepoTest, AppendValidatesTypeAndPayload) {
  EXPECT_EQ(repo_->Append("", "", json::object()).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto array = repo_->Append("", event_type::kFailed, json::array({1, 2}));
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(array.status().message(), HasSubstr("not a JSON object"));
  EXPECT_EQ(QueryInt(*db_, "SELECT count(*) FROM events"), 0);
}

TEST_F(EventRepoTest, InvalidUtf8InPayloadIsReplacedNotFatal) {
  AppendOrDie(event_type::kExecFinished, {{"stderr_tail", std::string("bad \xff byte")}});
  auto batch = repo_->Since(0, 10);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->events[0].payload["stderr_tail"], "bad \xEF\xBF\xBD byte");
}

TEST_F(EventRepoTest, DamagedPayloadIsDataLoss) {
  AppendOrDie(event_type::kCreated);
  ExecOrDie(*db_, "UPDATE events SET payload = '[1]'");
  auto batch = repo_->Since(0, 10);
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(batch.status().message(), HasSubstr("event 1"));
}

}  // namespace
}  // namespace abox::store
