#include "src/workspace/journal.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace {

Journal Sample() {
  Journal j;
  j.id = "20240102-030405-abcdef";
  j.sandbox = "sb";
  j.host_root = "/home/p/r\xff";  // not UTF-8: stored as base64
  j.created = "2024-01-02T03:04:05Z";
  j.kind = "apply";
  j.state = JournalState::kApplied;
  j.entries.push_back(
      {"a/b\xfe", PathState::File(0644, Sha256Hex("x")), PathState::Symlink("t\xff"), {"a"}});
  j.entries.push_back({"d", PathState::Dir(), PathState::Absent(), {}});
  j.notes.push_back("kept directory d");
  return j;
}

TEST(JournalTest, RoundTripsIncludingNonUtf8Names) {
  Journal j = Sample();
  auto parsed = ParseJournal(SerializeJournal(j));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->id, j.id);
  EXPECT_EQ(parsed->host_root, j.host_root);
  EXPECT_EQ(parsed->state, JournalState::kApplied);
  ASSERT_EQ(parsed->entries.size(), 2u);
  EXPECT_EQ(parsed->entries[0].path, "a/b\xfe");
  EXPECT_EQ(parsed->entries[0].before, j.entries[0].before);
  EXPECT_EQ(parsed->entries[0].after, j.entries[0].after);
  EXPECT_EQ(parsed->entries[0].created_dirs, std::vector<std::string>{"a"});
  EXPECT_EQ(parsed->entries[1].before, PathState::Dir());
  EXPECT_EQ(parsed->notes, j.notes);
}

TEST(JournalTest, RejectsDamage) {
  EXPECT_EQ(ParseJournal("{not json").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseJournal("[]").status().code(), absl::StatusCode::kDataLoss);
  std::string text = SerializeJournal(Sample());
  std::string bad_state = text;
  bad_state.replace(bad_state.find("\"applied\""), 9, "\"weird\"");
  EXPECT_EQ(ParseJournal(bad_state).status().code(), absl::StatusCode::kDataLoss);
  std::string bad_sha = text;
  bad_sha.replace(bad_sha.find(Sha256Hex("x")), 64, std::string(64, 'Z'));
  EXPECT_EQ(ParseJournal(bad_sha).status().code(), absl::StatusCode::kDataLoss);
}

TEST(JournalTest, RejectsPathsOutsideTheTree) {
  Journal j = Sample();
  j.entries[1].path = "../escape";
  EXPECT_FALSE(ParseJournal(SerializeJournal(j)).ok());
  j.entries[1].path = ".git/config";
  EXPECT_FALSE(ParseJournal(SerializeJournal(j)).ok());
}

}  // namespace
}  // namespace abox::workspace
