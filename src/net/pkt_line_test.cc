#include "src/net/pkt_line.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::net {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kZero(40, '0');
const std::string kOld = "1111111111111111111111111111111111111111";
const std::string kNew = "2222222222222222222222222222222222222222";

std::string Pkt(absl::string_view payload) { return EncodePktLine(payload); }

// What `git push` sends: commands, flush, then the pack.
std::string Push(const std::vector<std::string>& commands,
                 absl::string_view caps = "report-status side-band-64k agent=git/2.43.0") {
  std::string body;
  for (size_t i = 0; i < commands.size(); ++i) {
    body += Pkt(i == 0 ? absl::StrCat(commands[i], std::string(1, '\0'), caps) : commands[i]);
  }
  return body + "0000";
}

constexpr absl::string_view kPack = "PACK0002garbage that is never parsed";

struct Read {
  absl::StatusOr<bool> result = false;
  std::vector<RefUpdate> updates;
  std::vector<std::string> caps;
  uint64_t consumed = 0;
};

Read ReadAll(absl::string_view body, size_t split) {
  ReceivePackCommandReader reader;
  Read r;
  r.result = reader.Feed(body.substr(0, split));
  if (r.result.ok() && !*r.result) {
    r.result = reader.Feed(body.substr(split));
  }
  r.updates = reader.updates();
  r.caps = reader.capabilities();
  r.consumed = reader.consumed();
  return r;
}

TEST(PktLineTest, ReadsTheRefUpdatesOfAPushAtEverySplitAndStopsAtTheFlush) {
  std::string commands = Push({absl::StrCat(kOld, " ", kNew, " refs/heads/agent/fix"),
                               absl::StrCat(kZero, " ", kNew, " refs/heads/agent/new\n")});
  std::string body = commands + std::string(kPack);
  for (size_t split = 0; split <= body.size(); ++split) {
    Read r = ReadAll(body, split);
    ASSERT_TRUE(r.result.ok()) << r.result.status();
    ASSERT_TRUE(*r.result) << split;
    EXPECT_EQ(r.consumed, commands.size()) << split;
    ASSERT_EQ(r.updates.size(), 2u);
    EXPECT_EQ(r.updates[0].old_oid, kOld);
    EXPECT_EQ(r.updates[0].new_oid, kNew);
    EXPECT_EQ(r.updates[0].refname, "refs/heads/agent/fix");
    EXPECT_FALSE(r.updates[0].is_create());
    EXPECT_TRUE(r.updates[1].is_create());
    EXPECT_EQ(r.updates[1].refname, "refs/heads/agent/new");
    EXPECT_THAT(r.caps, ElementsAre("report-status", "side-band-64k", "agent=git/2.43.0"));
  }
  ReceivePackCommandReader reader;
  ASSERT_TRUE(reader.Feed(body).ok());
  EXPECT_TRUE(reader.HasCapability("side-band-64k"));
  EXPECT_FALSE(reader.HasCapability("side-band"));
}

TEST(PktLineTest, AcceptsShallowLinesSha256AndAnEmptyList) {
  std::string sha256_old(64, 'a');
  std::string sha256_new(64, 'b');
  std::string body = Pkt(absl::StrCat("shallow ", kOld)) +
                     Push({absl::StrCat(sha256_old, " ", sha256_new, " refs/heads/main")});
  Read r = ReadAll(body, body.size());
  ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_TRUE(*r.result);
  ASSERT_EQ(r.updates.size(), 1u);
  EXPECT_EQ(r.updates[0].new_oid, sha256_new);
  Read empty = ReadAll("0000", 4);
  ASSERT_TRUE(empty.result.ok());
  EXPECT_TRUE(*empty.result);
  EXPECT_TRUE(empty.updates.empty());
}

TEST(PktLineTest, WaitsForMoreOnATruncatedBody) {
  std::string body = Push({absl::StrCat(kOld, " ", kNew, " refs/heads/main")});
  for (size_t n = 0; n < body.size(); ++n) {
    ReceivePackCommandReader reader;
    absl::StatusOr<bool> r = reader.Feed(absl::string_view(body).substr(0, n));
    ASSERT_TRUE(r.ok()) << n << r.status();
    EXPECT_FALSE(*r) << n;
    EXPECT_FALSE(reader.done());
  }
}

TEST(PktLineTest, RefusesHostileInputWithAClearMessage) {
  std::string cmd = absl::StrCat(kOld, " ", kNew, " refs/heads/main");
  struct Case {
    std::string body;
    std::string message;
  };
  std::vector<Case> cases = {
      {"00zz", "not 4 hex digits"},
      {"-001", "not 4 hex digits"},
      {"0003", "reserved"},
      {"0004", "empty line"},
      {"fff1", "exceeds the maximum"},
      {"ffff", "exceeds the maximum"},
      {"0001", "protocol v2"},
      {"0002", "protocol v2"},
      {Pkt(cmd) + "0000", "NUL missing"},
      {Push({cmd, cmd + std::string(1, '\0') + "x"}), "carries a NUL"},
      {Push({absl::StrCat(kOld, " ", kNew)}), "bad command"},
      {Push({absl::StrCat(kOld, "  ", kNew, " refs/heads/main")}), "bad command"},
      {Push({absl::StrCat(std::string(40, 'A'), " ", kNew, " refs/heads/main")}), "bad command"},
      {Push({absl::StrCat(kOld, " ", std::string(64, '2'), " refs/heads/main")}), "bad command"},
      {Push({absl::StrCat(kOld.substr(1), " ", kNew, " refs/heads/main")}), "bad command"},
      {Push({absl::StrCat(kOld, " ", kNew, " refs/heads/a..b")}), "bad ref name"},
      {Push({absl::StrCat(kOld, " ", kNew, " refs/heads/x.lock")}), "bad ref name"},
      {Push({absl::StrCat(kOld, " ", kNew, " refs/heads/a b")}), "bad ref name"},
      {Push({absl::StrCat(kOld, " ", kNew, " refs/heads/a\x01")}), "bad ref name"},
      {Push({absl::StrCat(kOld, " ", kNew, " refs/heads/")}), "bad ref name"},
      {Push({"push-cert"}), "signed pushes"},
      {Pkt("shallow xyz"), "shallow"},
  };
  for (const Case& c : cases) {
    ReceivePackCommandReader reader;
    absl::StatusOr<bool> r = reader.Feed(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
    EXPECT_THAT(r.status().message(), HasSubstr("refused git push: "));
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.body;
    // Refused for good.
    EXPECT_FALSE(reader.Feed("0000").ok());
  }
}

TEST(PktLineTest, CapsTheNumberOfRefUpdates) {
  std::vector<std::string> commands;
  for (size_t i = 0; i <= kMaxRefUpdates; ++i) {
    commands.push_back(absl::StrCat(kOld, " ", kNew, " refs/heads/b", i));
  }
  ReceivePackCommandReader reader;
  absl::StatusOr<bool> r = reader.Feed(Push(commands));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("more than 1000 ref updates"));
  commands.pop_back();
  ReceivePackCommandReader ok;
  ASSERT_TRUE(ok.Feed(Push(commands)).ok());
  EXPECT_EQ(ok.updates().size(), kMaxRefUpdates);
  std::string shallow;
  for (size_t i = 0; i <= kMaxShallowLines; ++i) {
    shallow += Pkt(absl::StrCat("shallow ", kOld));
  }
  ReceivePackCommandReader many;
  EXPECT_FALSE(many.Feed(shallow).ok());
}

TEST(PktLineTest, ReaderSplitsLinesAndV2MarkersWhenAllowed) {
  PktLineReader reader(/*allow_v2_markers=*/true);
  std::string bytes = "0009hello000100020000000";
  absl::string_view data = bytes;
  std::vector<PktLine::Kind> kinds;
  while (true) {
    absl::StatusOr<std::optional<PktLine>> line = reader.Next(&data);
    ASSERT_TRUE(line.ok()) << line.status();
    if (!line->has_value()) {
      break;
    }
    kinds.push_back((*line)->kind);
    if ((*line)->kind == PktLine::Kind::kData) {
      EXPECT_EQ((*line)->payload, "hello");
    }
  }
  EXPECT_THAT(kinds, ElementsAre(PktLine::Kind::kData, PktLine::Kind::kDelim,
                                 PktLine::Kind::kResponseEnd, PktLine::Kind::kFlush));
  // A maximal line is accepted, uppercase hex too.
  std::string max_line = "FFF0" + std::string(kMaxPktLineSize - 4, 'x');
  absl::string_view max_data = max_line;
  PktLineReader big;
  absl::StatusOr<std::optional<PktLine>> line = big.Next(&max_data);
  ASSERT_TRUE(line.ok()) << line.status();
  ASSERT_TRUE(line->has_value());
  EXPECT_EQ((*line)->payload.size(), kMaxPktLineSize - 4);
}

TEST(PktLineTest, ValidatesRefNamesLikeGit) {
  for (absl::string_view good : {"refs/heads/main", "refs/heads/agent/fix-1", "refs/tags/v1.0"}) {
    EXPECT_TRUE(IsValidRefName(good)) << good;
  }
  for (absl::string_view bad :
       {"", "refs/heads/", "refs//heads", "/refs/heads/x", "refs/heads/x.", "refs/heads/.x",
        "refs/heads/a..b", "refs/heads/a@{1}", "refs/heads/a~1", "refs/heads/a^", "refs/heads/a:b",
        "refs/heads/a?", "refs/heads/a*", "refs/heads/a[", "refs/heads/a\\b", "@",
        "refs/heads/x.lock"}) {
    EXPECT_FALSE(IsValidRefName(bad)) << bad;
  }
  EXPECT_FALSE(IsValidRefName(std::string(kMaxRefNameSize + 1, 'a')));
}

// Splits pkt-lines (test helper): payloads, "" for a flush.
std::vector<std::string> Lines(absl::string_view bytes) {
  PktLineReader reader;
  std::vector<std::string> out;
  while (!bytes.empty()) {
    auto line = reader.Next(&bytes);
    EXPECT_TRUE(line.ok()) << line.status();
    if (!line.ok() || !line->has_value()) {
      break;
    }
    out.push_back((*line)->payload);
  }
  return out;
}

TEST(PktLineTest, BuildsARefusalGitShowsWithSideBandAndReportStatus) {
  std::vector<RefUpdate> updates = {{kOld, kNew, "refs/heads/main"},
                                    {kOld, kNew, "refs/heads/agent/ok"}};
  std::vector<RefRefusal> refusals = {
      {"refs/heads/main", "this sandbox may push only to branches matching agent/*"}};
  EXPECT_EQ(RefusalText(refusals[0]),
            "abox: push to refs/heads/main refused: this sandbox may push only to branches "
            "matching agent/*");
  std::string reply = BuildReceivePackRefusal(
      updates, refusals, {"report-status", "side-band-64k", "agent=git/2.43.0"});
  std::vector<std::string> lines = Lines(reply);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], absl::StrCat("\x02", RefusalText(refusals[0]), "\n"));
  ASSERT_EQ(lines[1][0], '\x01');
  EXPECT_EQ(lines[2], "");  // flush
  std::vector<std::string> report = Lines(lines[1].substr(1));
  EXPECT_THAT(report,
              ElementsAre("unpack ok\n",
                          absl::StrCat("ng refs/heads/main ", RefusalText(refusals[0]), "\n"),
                          "ng refs/heads/agent/ok abox: not pushed: another ref in this "
                          "push was refused\n",
                          ""));
  // Without side-band: the report alone; with neither: one ERR line.
  std::string plain = BuildReceivePackRefusal(updates, refusals, {"report-status-v2"});
  EXPECT_EQ(Lines(plain).front(), "unpack ok\n");
  EXPECT_EQ(Lines(plain).size(), 4u);
  std::string err = BuildReceivePackRefusal(updates, refusals, {});
  EXPECT_THAT(Lines(err), ElementsAre(absl::StrCat("ERR ", RefusalText(refusals[0]))));
  // Old side-band: channel 1 packets of at most 1000 bytes.
  std::vector<RefUpdate> many(50, RefUpdate{kOld, kNew, "refs/heads/main"});
  std::string small = BuildReceivePackRefusal(many, refusals, {"report-status", "side-band"});
  for (const std::string& l : Lines(small)) {
    EXPECT_LE(l.size() + 4, 1000u);
  }
}

}  // namespace
}  // namespace abox::net
