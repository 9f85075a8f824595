#include "src/mcp/exec_sessions.h"

#include <thread>

#include "gtest/gtest.h"

namespace abox::mcp {
namespace {

// A session fed by hand, as its reader thread feeds it (no daemon: the reader never starts).
class ExecSessionTest : public testing::Test {
 protected:
  ExecSessionTest() : session_("sb", "ex", *client::ApiClient::Create("/nonexistent/aboxd.sock")) {}
  ExecSession session_;
};

TEST_F(ExecSessionTest, ReadsFromACursorAcrossStreams) {
  session_.Append(false, "one\n");
  session_.Append(true, "oops\n");
  session_.Append(false, "two\n");
  ExecRead all = session_.Read(0, 1000);
  EXPECT_EQ(all.stdout_text, "one\ntwo\n");
  EXPECT_EQ(all.stderr_text, "oops\n");
  EXPECT_EQ(all.next_cursor, 13);
  EXPECT_FALSE(all.more);
  EXPECT_EQ(all.dropped_bytes, 0);

  ExecRead part = session_.Read(2, 5);  // "e\n" + "oop"
  EXPECT_EQ(part.stdout_text, "e\n");
  EXPECT_EQ(part.stderr_text, "oop");
  EXPECT_EQ(part.next_cursor, 7);
  EXPECT_TRUE(part.more);
  ExecRead rest = session_.Read(part.next_cursor, 1000);
  EXPECT_EQ(rest.stderr_text, "s\n");
  EXPECT_EQ(rest.stdout_text, "two\n");
  EXPECT_EQ(session_.Read(13, 10).next_cursor, 13);
  EXPECT_EQ(session_.Read(500, 10).next_cursor, 13) << "a cursor past the end is the end";
}

TEST_F(ExecSessionTest, NeverSplitsACharacterBetweenReads) {
  session_.Append(false, "a\xC3\xA9z");  // a é z
  ExecRead first = session_.Read(0, 2);
  EXPECT_EQ(first.stdout_text, "a");
  EXPECT_EQ(first.next_cursor, 1);
  ExecRead second = session_.Read(first.next_cursor, 2);
  EXPECT_EQ(second.stdout_text, "\xC3\xA9");
}

TEST_F(ExecSessionTest, KeepsTheNewestOutputAndCountsWhatWasDropped) {
  std::string block(ExecSession::kKeptBytes / 2, 'x');
  session_.Append(false, block);
  session_.Append(false, block);
  session_.Append(false, "tail");
  ExecRead r = session_.Read(0, 10);
  EXPECT_EQ(r.dropped_bytes, static_cast<int64_t>(block.size()));
  EXPECT_EQ(r.next_cursor, static_cast<int64_t>(block.size()) + 10);
  EXPECT_EQ(session_.State().stdout_bytes, static_cast<int64_t>(2 * block.size() + 4));
  std::string kept = session_.Output(false);
  EXPECT_EQ(kept.size(), block.size() + 4);
  EXPECT_EQ(kept.substr(kept.size() - 4), "tail");
}

TEST_F(ExecSessionTest, ReportsTheEndWithTheExitCodeAndWakesWaiters) {
  EXPECT_EQ(session_.State().state, "running");
  EXPECT_FALSE(session_.WaitFor(absl::Milliseconds(1)));
  std::thread ender([&] {
    api::Exec exec;
    exec.state = "exited";
    exec.exit_code = 3;
    session_.Finish(exec, "");
  });
  EXPECT_TRUE(session_.WaitFor(absl::Seconds(20)));
  ender.join();
  ExecState s = session_.State();
  EXPECT_TRUE(s.ended);
  EXPECT_EQ(s.state, "exited");
  EXPECT_EQ(s.exit_code, 3);
}

TEST_F(ExecSessionTest, AStreamThatEndsWithoutAResultIsLost) {
  session_.Finish(std::nullopt, "aboxd went away");
  ExecState s = session_.State();
  EXPECT_TRUE(s.ended);
  EXPECT_EQ(s.state, "lost");
  EXPECT_EQ(s.error, "aboxd went away");
  EXPECT_FALSE(s.exit_code.has_value());
}

}  // namespace
}  // namespace abox::mcp
