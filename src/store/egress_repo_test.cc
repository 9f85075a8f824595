#include "src/store/egress_repo.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/store/event_repo.h"
#include "src/store/sandbox_repo.h"
#include "src/store/test_util.h"

namespace abox::store {
namespace {

using ::testing::ElementsAre;
using testing::FakeClock;
using ::testing::HasSubstr;
using testing::QueryInt;
using testing::TempDir;

constexpr char kSandbox[] = "0123456789ab";
constexpr char kOther[] = "ba9876543210";

class EgressRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = testing::OpenStateOrDie(tmp_.file("state.db"));
    ASSERT_NE(db_, nullptr);
    sandboxes_ = std::make_unique<SandboxRepo>(*db_, clock_.AsClock());
    for (const char* id : {kSandbox, kOther}) {
      SandboxRecord s;
      s.id = id;
      s.image = "default";
      ASSERT_TRUE(sandboxes_->Insert(s).ok());
    }
    repo_ = std::make_unique<EgressRepo>(*db_, clock_.AsClock(),
                                         EgressRepoOptions{.log_rows_per_sandbox = 3});
  }

  EgressConnectionRow Connection(const std::string& name, const std::string& sandbox = kSandbox) {
    EgressConnectionRow r;
    r.sandbox_id = sandbox;
    r.time = clock_.now();
    r.kind = "tls";
    r.name = name;
    r.address = "192.0.2.1";
    r.port = 443;
    r.verdict = "allowed";
    r.matched_rule = name;
    r.bytes_up = 10;
    r.bytes_down = 20;
    r.duration_ms = 5;
    return r;
  }

  TempDir tmp_;
  FakeClock clock_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<SandboxRepo> sandboxes_;
  std::unique_ptr<EgressRepo> repo_;
};

TEST_F(EgressRepoTest, GlobalPolicyDefaultsToAnEmptyAllowlistAndRoundTrips) {
  absl::StatusOr<EgressPolicyRecord> initial = repo_->GetGlobalPolicy();
  ASSERT_TRUE(initial.ok()) << initial.status();
  EXPECT_EQ(initial->mode, "allowlist");
  EXPECT_TRUE(initial->allow.empty());
  EXPECT_FALSE(initial->updated_at.has_value());

  ASSERT_TRUE(repo_->PutGlobalPolicy({"open", {"preset:pypi", "example.com:80"}, {}}).ok());
  absl::StatusOr<EgressPolicyRecord> stored = repo_->GetGlobalPolicy();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->mode, "open");
  EXPECT_THAT(stored->allow, ElementsAre("preset:pypi", "example.com:80"));
  EXPECT_EQ(stored->updated_at, clock_.now());

  EXPECT_EQ(repo_->PutGlobalPolicy({std::nullopt, {}, {}}).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status bad = repo_->PutGlobalPolicy({"wide", {}, {}});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("wide"));
}

TEST_F(EgressRepoTest, SandboxPolicyInheritsUntilSetAndGoesWithTheSandbox) {
  absl::StatusOr<EgressPolicyRecord> initial = repo_->GetSandboxPolicy(kSandbox);
  ASSERT_TRUE(initial.ok());
  EXPECT_FALSE(initial->mode.has_value());
  EXPECT_TRUE(initial->allow.empty());

  ASSERT_TRUE(repo_->PutSandboxPolicy(kSandbox, {std::nullopt, {"api.github.com"}, {}}).ok());
  EXPECT_FALSE(repo_->GetSandboxPolicy(kSandbox)->mode.has_value());
  ASSERT_TRUE(repo_->PutSandboxPolicy(kSandbox, {"none", {"api.github.com"}, {}}).ok());
  EXPECT_EQ(repo_->GetSandboxPolicy(kSandbox)->mode, "none");
  EXPECT_THAT(repo_->GetSandboxPolicy(kSandbox)->allow, ElementsAre("api.github.com"));
  EXPECT_TRUE(repo_->GetSandboxPolicy(kOther)->allow.empty());

  EXPECT_EQ(repo_->PutSandboxPolicy("000000000000", {}).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(sandboxes_->Delete(kSandbox).ok());
  EXPECT_EQ(QueryInt(*db_, "SELECT count(*) FROM egress_sandbox_policies"), 0);
}

TEST_F(EgressRepoTest, LogsListNewestFirstAndKeepOnlyTheNewestRowsPerSandbox) {
  for (const char* name : {"a.example", "b.example", "c.example", "d.example", "e.example"}) {
    ASSERT_TRUE(repo_->AddConnection(Connection(name)).ok());
    clock_.Advance(absl::Seconds(1));
  }
  ASSERT_TRUE(repo_->AddConnection(Connection("other.example", kOther)).ok());
  absl::StatusOr<std::vector<EgressConnectionRow>> rows = repo_->ListConnections(kSandbox, 10);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<std::string> names;
  for (const auto& r : *rows) {
    names.push_back(r.name);
  }
  EXPECT_THAT(names, ElementsAre("e.example", "d.example", "c.example"));
  EXPECT_EQ((*rows)[0].bytes_down, 20);
  EXPECT_EQ((*rows)[0].port, 443);
  EXPECT_EQ(repo_->ListConnections(kSandbox, 1)->size(), 1u);
  EXPECT_EQ(repo_->ListConnections(kOther, 10)->size(), 1u) << "pruning crossed sandboxes";
  EXPECT_EQ(repo_->ListConnections(kSandbox, 0).status().code(),
            absl::StatusCode::kInvalidArgument);

  EgressDnsRow dns;
  dns.sandbox_id = kSandbox;
  dns.time = clock_.now();
  dns.name = "pypi.org";
  dns.qtype = 1;
  dns.verdict = "denied";
  dns.rcode = 3;
  dns.answers = {"192.0.2.7"};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(repo_->AddDns(dns).ok());
  }
  absl::StatusOr<std::vector<EgressDnsRow>> lookups = repo_->ListDns(kSandbox, 10);
  ASSERT_TRUE(lookups.ok());
  ASSERT_EQ(lookups->size(), 3u);
  EXPECT_GT((*lookups)[0].seq, (*lookups)[1].seq);
  EXPECT_THAT((*lookups)[0].answers, ElementsAre("192.0.2.7"));
  EXPECT_EQ((*lookups)[0].rcode, 3);

  ASSERT_TRUE(sandboxes_->Delete(kSandbox).ok());
  EXPECT_EQ(QueryInt(*db_, "SELECT count(*) FROM egress_connections"), 1);
  EXPECT_EQ(QueryInt(*db_, "SELECT count(*) FROM egress_dns"), 0);
}

TEST_F(EgressRepoTest, ADeniedNameEntersTheQueueOnceAndCountsEveryRefusal) {
  absl::StatusOr<DenialOutcome> first = repo_->RecordDenial(kSandbox, "pypi.org", 0, "dns");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->newly_pending);
  EXPECT_EQ(first->request.state, EgressRequestState::kPending);
  clock_.Advance(absl::Seconds(3));
  absl::StatusOr<DenialOutcome> second = repo_->RecordDenial(kSandbox, "pypi.org", 443, "tls");
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->newly_pending);
  EXPECT_EQ(second->request.count, 2);
  EXPECT_EQ(second->request.port, 443);
  EXPECT_EQ(second->request.reason, "tls");
  EXPECT_EQ(second->request.last_seen - second->request.first_seen, absl::Seconds(3));
  // A later DNS refusal keeps the port a connection was refused on.
  EXPECT_EQ(repo_->RecordDenial(kSandbox, "pypi.org", 0, "dns")->request.port, 443);

  absl::StatusOr<std::vector<EgressRequest>> queue =
      repo_->ListRequests({.states = {EgressRequestState::kPending}});
  ASSERT_TRUE(queue.ok());
  ASSERT_EQ(queue->size(), 1u);
  EXPECT_EQ((*queue)[0].count, 3);
  EXPECT_EQ(repo_->RecordDenial("000000000000", "x.example", 0, "").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(EgressRepoTest, OnceApprovalsAreUsedUpByOneConnectionOnTheirPort) {
  ASSERT_TRUE(repo_->RecordDenial(kSandbox, "pypi.org", 443, "denied").ok());
  absl::StatusOr<EgressRequest> approved =
      repo_->Decide(kSandbox, "pypi.org", EgressRequestState::kApprovedOnce, 443);
  ASSERT_TRUE(approved.ok());
  EXPECT_TRUE(approved->once_left);
  EXPECT_TRUE(*repo_->HasOnce(kSandbox, "pypi.org"));
  EXPECT_FALSE(*repo_->HasOnce(kOther, "pypi.org"));
  EXPECT_FALSE(*repo_->TakeOnce(kSandbox, "pypi.org", 80)) << "another port";
  EXPECT_TRUE(*repo_->TakeOnce(kSandbox, "pypi.org", 443));
  EXPECT_FALSE(*repo_->TakeOnce(kSandbox, "pypi.org", 443)) << "used twice";
  EXPECT_FALSE(*repo_->HasOnce(kSandbox, "pypi.org"));
  // Refused again after the one connection: a new question.
  absl::StatusOr<DenialOutcome> again = repo_->RecordDenial(kSandbox, "pypi.org", 443, "denied");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->newly_pending);
  EXPECT_EQ(again->request.state, EgressRequestState::kPending);
}

TEST_F(EgressRepoTest, DeniedAndIgnoredNamesStayOutOfTheQueue) {
  ASSERT_TRUE(repo_->RecordDenial(kSandbox, "tracker.example", 443, "denied").ok());
  ASSERT_TRUE(repo_->Decide(kSandbox, "tracker.example", EgressRequestState::kDenied).ok());
  absl::StatusOr<DenialOutcome> denied =
      repo_->RecordDenial(kSandbox, "tracker.example", 443, "denied");
  EXPECT_FALSE(denied->newly_pending);
  EXPECT_EQ(denied->request.state, EgressRequestState::kDenied);
  EXPECT_EQ(denied->request.count, 2);

  ASSERT_TRUE(repo_->RecordDenial(kSandbox, "ads.example", 443, "denied").ok());
  ASSERT_TRUE(repo_->RecordDenial(kOther, "ads.example", 443, "denied").ok());
  absl::StatusOr<int64_t> changed = repo_->Ignore("ads.example");
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, 2);
  EXPECT_TRUE(*repo_->IsIgnored("ads.example"));
  EXPECT_TRUE(repo_->ListRequests({.states = {EgressRequestState::kPending}})->empty());
  // A sandbox that never asked before does not bring it back.
  ASSERT_TRUE(sandboxes_->Delete(kOther).ok());
  SandboxRecord fresh;
  fresh.id = kOther;
  fresh.image = "default";
  ASSERT_TRUE(sandboxes_->Insert(fresh).ok());
  absl::StatusOr<DenialOutcome> later = repo_->RecordDenial(kOther, "ads.example", 443, "denied");
  EXPECT_FALSE(later->newly_pending);
  EXPECT_EQ(later->request.state, EgressRequestState::kIgnored);
  absl::StatusOr<std::vector<EgressRequest>> all =
      repo_->ListRequests({.sandbox_id = std::string(kSandbox)});
  EXPECT_EQ(all->size(), 2u);
}

// A hostile guest makes up names and connections without end: its sandbox's queue stops at
// the cap (the rest counted, not stored), its logs keep their newest rows (the rest counted),
// and the other sandbox loses nothing. A second flood as big does not grow the file.
TEST_F(EgressRepoTest, AGuestsFloodIsCappedInItsOwnSandboxAndCounted) {
  EgressRepo repo(*db_, clock_.AsClock());  // the defaults aboxd runs with
  EventRepo events(*db_, clock_.AsClock());
  const int64_t queue_cap = repo.options().pending_per_sandbox;
  const int64_t log_cap = repo.options().log_rows_per_sandbox;
  for (int i = 0; i < 10; ++i) {
    const std::string name = absl::StrCat("b", i, ".example.org");
    ASSERT_TRUE(repo.RecordDenial(kOther, name, 443, "not allowed").ok());
    ASSERT_TRUE(repo.AddConnection(Connection(name, kOther)).ok());
    ASSERT_TRUE(events.Append(kOther, "egress_denied", {{"name", name}}).ok());
  }
  auto flood = [&](int round, int names, int rows) {
    int64_t dropped = 0;
    for (int i = 0; i < names; ++i) {
      auto outcome = repo.RecordDenial(kSandbox, absl::StrCat("x", round, "-", i, ".exfil.example"),
                                       443, "not allowed");
      ASSERT_TRUE(outcome.ok()) << outcome.status();
      dropped += outcome->dropped ? 1 : 0;
    }
    for (int i = 0; i < rows; ++i) {
      ASSERT_TRUE(repo.AddConnection(Connection(absl::StrCat("r", i, ".example"))).ok());
      ASSERT_TRUE(events.Append(kSandbox, "egress_denied", {{"i", i}}).ok());
    }
    EXPECT_EQ(dropped, round == 1 ? names - queue_cap : names);
  };
  auto file_size = [&] {
    testing::ExecOrDie(*db_, "PRAGMA wal_checkpoint(TRUNCATE)");
    return QueryInt(*db_, "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size");
  };

  flood(1, 20000, 50000);
  const int64_t after_one = file_size();
  EXPECT_EQ(QueryInt(*db_, absl::StrCat("SELECT count(*) FROM egress_requests WHERE sandbox_id = '",
                                        kSandbox, "'")),
            queue_cap);
  EXPECT_EQ(QueryInt(*db_, absl::StrCat("SELECT count(*) FROM egress_connections WHERE "
                                        "sandbox_id = '",
                                        kSandbox, "'")),
            log_cap);
  absl::StatusOr<RetentionCounters> counters = repo.Counters(kSandbox);
  ASSERT_TRUE(counters.ok()) << counters.status();
  EXPECT_EQ(counters->queue_dropped, 20000 - queue_cap);
  EXPECT_EQ(counters->connections_pruned, 50000 - log_cap);
  EXPECT_EQ(counters->events_pruned, 50000 - events.options().retain);

  flood(2, 5000, 12500);
  EXPECT_EQ(repo.Counters(kSandbox)->queue_dropped, 25000 - queue_cap);
  EXPECT_EQ(repo.Counters(kSandbox)->connections_pruned, 62500 - log_cap);
  // Freed pages are reused: the second flood leaves the file where the first did.
  EXPECT_LE(file_size(), after_one + after_one / 10);

  // The other sandbox's ten records, all of them, and nothing counted against it.
  absl::StatusOr<std::vector<EgressRequest>> theirs =
      repo.ListRequests({.sandbox_id = std::string(kOther)});
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(theirs->size(), 10u);
  EXPECT_EQ(repo.ListConnections(kOther, 100)->size(), 10u);
  EXPECT_EQ(*events.Count(kOther), 10);
  EXPECT_EQ(*repo.Counters(kOther), RetentionCounters{});
}

TEST_F(EgressRepoTest, RequestStatesHaveStableNames) {
  for (EgressRequestState s :
       {EgressRequestState::kPending, EgressRequestState::kApprovedOnce,
        EgressRequestState::kApproved, EgressRequestState::kDenied, EgressRequestState::kIgnored}) {
    EXPECT_EQ(*ParseEgressRequestState(EgressRequestStateName(s)), s);
  }
  absl::StatusOr<EgressRequestState> bad = ParseEgressRequestState("maybe");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("approved_once"));
}

}  // namespace
}  // namespace abox::store
