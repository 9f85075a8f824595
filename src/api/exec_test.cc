#include "src/api/exec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"
#include "src/api/wire.h"

namespace abox::api {
namespace {

TEST(ExecCreateTest, ArgvOrShellExactlyOne) {
  EXPECT_TRUE(DecodeExecCreate(R"({"argv":["ls","-l"]})").ok());
  EXPECT_TRUE(DecodeExecCreate(R"({"shell":"echo hi"})").ok());
  EXPECT_EQ(FieldOf(DecodeExecCreate(R"({})").status()).value_or(""), "argv");
  EXPECT_EQ(FieldOf(DecodeExecCreate(R"({"argv":["a"],"shell":"b"})").status()).value_or(""),
            "shell");
  EXPECT_EQ(FieldOf(DecodeExecCreate(R"({"argv":["a"],"user":"bob"})").status()).value_or(""),
            "user");
  EXPECT_EQ(FieldOf(DecodeExecCreate(R"({"argv":["a"],"pty":{"rows":0,"cols":80}})").status())
                .value_or(""),
            "pty.rows");
  EXPECT_EQ(FieldOf(DecodeExecCreate(R"({"argv":["a"],"env":{"A=B":"c"}})").status()).value_or(""),
            "env.A=B");
  absl::StatusOr<ExecCreate> full = DecodeExecCreate(
      R"({"argv":["sh"],"env":{"A":"1"},"cwd":"/tmp","user":"root","timeout_ms":5,)"
      R"("stdin":true,"pty":{"rows":24,"cols":80},"kill_on_disconnect":true})");
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_TRUE(full->stdin_open);
  EXPECT_TRUE(full->kill_on_disconnect);
  ASSERT_TRUE(full->pty.has_value());
  EXPECT_EQ(full->pty->second, 80);
}

TEST(ExecCreateTest, EncodeThenDecodeGivesTheSameRequest) {
  ExecCreate c;
  c.argv = {"make", "test"};
  c.env = {{"CI", "1"}};
  c.cwd = "/workspace";
  c.user = "root";
  c.timeout_ms = 5000;
  c.stdin_open = true;
  c.pty = std::make_pair(24, 80);
  c.kill_on_disconnect = true;
  c.sync = false;
  c.kill_leftovers = true;
  absl::StatusOr<ExecCreate> back = DecodeExecCreate(Dump(ToJson(c)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
  ExecCreate shell;
  shell.shell = "echo hi";
  back = DecodeExecCreate(Dump(ToJson(shell)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, shell);
  EXPECT_EQ(*DecodePtySize(Dump(PtySizeToJson(40, 120))),
            std::make_pair(int64_t{40}, int64_t{120}));
  EXPECT_EQ(*DecodeSignalRequest(Dump(SignalRequestToJson("TERM"))), 15);
}

TEST(SignalTest, NamesAndNumbers) {
  EXPECT_EQ(*ParseSignal("TERM"), 15);
  EXPECT_EQ(*ParseSignal("sigint"), 2);
  EXPECT_EQ(*ParseSignal("9"), 9);
  EXPECT_FALSE(ParseSignal("NOPE").ok());
  EXPECT_FALSE(ParseSignal("0").ok());
  EXPECT_EQ(*DecodeSignalRequest(R"({"signal":"KILL"})"), 9);
  EXPECT_EQ(*DecodeSignalRequest(R"({"signal":1})"), 1);
  EXPECT_FALSE(DecodeSignalRequest(R"({"signal":99})").ok());
  EXPECT_FALSE(DecodeSignalRequest(R"({"signal":true})").ok());
}

TEST(OutputJsonTest, Utf8AsTextElseBase64) {
  nlohmann::json text = ToJson(OutputChunk{3, "stderr", "héllo\n"});
  EXPECT_EQ(text["data"], "héllo\n");
  EXPECT_EQ(text["stream"], "stderr");
  EXPECT_EQ(text["seq"], 3);
  EXPECT_FALSE(text.contains("data_b64"));
  for (std::string bad : {std::string("\xff"), std::string("a\xc3"), std::string("\xc0\x80"),
                          std::string("\xed\xa0\x80")}) {
    nlohmann::json bin = ToJson(OutputChunk{1, "stdout", bad});
    EXPECT_FALSE(bin.contains("data"));
    EXPECT_TRUE(bin.contains("data_b64"));
    // Either way the bytes come back.
    EXPECT_EQ(DecodeOutputChunk(bin)->data, bad);
  }
  EXPECT_EQ(ToJson(OutputChunk{1, "stdout", std::string("\xff\x00", 2)})["data_b64"], "/wA=");
  EXPECT_EQ(DecodeOutputChunk(text)->data, "héllo\n");
  absl::StatusOr<OutputChunk> garbled = DecodeOutputChunk({{"seq", 1}, {"data_b64", "!!"}});
  ASSERT_FALSE(garbled.ok());
  EXPECT_EQ(FieldOf(garbled.status()).value_or(""), "data_b64");
}

Exec EndedExec() {
  Exec e;
  e.id = "4be1c2d3e4f5a6b7";
  e.sandbox_id = "0123456789ab";
  e.argv = {"sh", "-c", "make test"};
  e.env = {{"CI", "1"}};
  e.cwd = "/workspace";
  e.user = "agent";
  e.pty = true;
  e.timeout_ms = 1500;
  e.state = "exited";
  e.exit_code = 2;
  e.signal = 9;
  e.timed_out = true;
  e.error = "killed";
  e.oom_kills = 2;
  e.started_at = absl::FromUnixMillis(1000000);
  e.finished_at = absl::FromUnixMillis(1001250);
  e.output_bytes = 6;
  e.output_truncated = true;
  return e;
}

TEST(ExecJsonTest, EncodeThenDecodeGivesTheSameExec) {
  Exec with_output = EndedExec();
  with_output.output = {{{1, "stdout", "hi\n"}, {2, "stderr", std::string("\xff", 1)}}};
  Exec shell;
  shell.id = "e2";
  shell.shell = "sleep 9";
  shell.state = "running";
  shell.started_at = absl::FromUnixSeconds(5);
  for (const Exec& e : {EndedExec(), with_output, shell}) {
    absl::StatusOr<Exec> back = DecodeExec(ToJson(e));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, e);
  }
  Exec omitted = EndedExec();
  omitted.output_omitted = true;
  absl::StatusOr<std::vector<Exec>> list = DecodeExecList(ExecListToJson({with_output, omitted}));
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0], with_output);
  EXPECT_EQ((*list)[1], omitted);
}

TEST(ExecJsonTest, HowItEndedIsSentOnlyOnceItEnded) {
  Exec running = EndedExec();
  running.state = "running";
  nlohmann::json j = ToJson(running);
  for (const char* absent : {"exit_code", "signal", "timed_out", "error", "oom_kills"}) {
    EXPECT_FALSE(j.contains(absent)) << absent;
  }
  EXPECT_EQ(j["argv"], nlohmann::json({"sh", "-c", "make test"}));
  EXPECT_FALSE(j.contains("shell"));
  nlohmann::json ended = ToJson(EndedExec());
  EXPECT_EQ(ended["exit_code"], 2);
  EXPECT_EQ(ended["timed_out"], true);
  EXPECT_EQ(ended["oom_kills"], 2);
  EXPECT_EQ(ended["finished_at"], "1970-01-01T00:16:41.250Z");
  EXPECT_FALSE(ended.contains("output"));
  EXPECT_FALSE(ended.contains("output_omitted"));
}

TEST(ExecJsonTest, DecodeIgnoresUnknownFieldsAndNamesMistypedOnes) {
  nlohmann::json j = ToJson(EndedExec());
  j["new_field"] = "x";
  EXPECT_TRUE(DecodeExec(j).ok());
  struct Case {
    nlohmann::json value;
    const char* field;
  };
  for (const Case& c :
       {Case{{{"exit_code", "2"}}, "exit_code"}, Case{{{"argv", {"a", 1}}}, "argv[1]"},
        Case{{{"timed_out", 1}}, "timed_out"}, Case{{{"oom_kills", "2"}}, "oom_kills"},
        Case{{{"oom_kills", 1.5}}, "oom_kills"}, Case{{{"started_at", 17}}, "started_at"},
        Case{{{"output", {{{"seq", "1"}}}}}, "output[0].seq"}}) {
    absl::StatusOr<Exec> e = DecodeExec(c.value);
    ASSERT_FALSE(e.ok()) << c.value;
    EXPECT_EQ(FieldOf(e.status()).value_or(""), c.field) << e.status();
  }
  EXPECT_FALSE(DecodeExecList({{"execs", 3}}).ok());
}

TEST(ExecJsonTest, OomKillsAreZeroWhenAbsentOrNegative) {
  // An aboxd from before the field sends none.
  absl::StatusOr<Exec> old = DecodeExec({{"state", "exited"}, {"signal", 9}});
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->oom_kills, 0);
  absl::StatusOr<Exec> negative = DecodeExec({{"state", "exited"}, {"oom_kills", -4}});
  ASSERT_TRUE(negative.ok()) << negative.status();
  EXPECT_EQ(negative->oom_kills, 0);
  Exec none = EndedExec();
  none.oom_kills = 0;
  EXPECT_EQ(ToJson(none)["oom_kills"], 0);
}

TEST(OomSentenceTest, TheCommandItselfKilledForLackOfMemory) {
  Exec e = EndedExec();
  e.timed_out = false;
  e.exit_code.reset();
  e.signal = 9;
  e.oom_kills = 1;
  EXPECT_EQ(OomSentence(e, 512, "give it more with --memory MIB, e.g. abox create --memory 1024"),
            "the command was killed for lack of memory (the sandbox has 512 MiB; give it more "
            "with --memory MIB, e.g. abox create --memory 1024)");
  EXPECT_EQ(OomSentence(e, 0, "give the sandbox more memory"),
            "the command was killed for lack of memory (give the sandbox more memory)");
}

TEST(OomSentenceTest, OtherProcessesEndedByTheOomKiller) {
  Exec e = EndedExec();
  e.timed_out = false;
  e.signal.reset();
  e.exit_code = 2;  // make, after the OOM killer took a compiler
  e.oom_kills = 3;
  EXPECT_EQ(OomSentence(e, 2048, "more"),
            "the OOM killer ended 3 processes during this command (the sandbox has 2048 MiB; "
            "more)");
  e.oom_kills = 1;
  EXPECT_EQ(OomSentence(e, 2048, "more"),
            "the OOM killer ended 1 process during this command (the sandbox has 2048 MiB; more)");
  // Killed by its timeout, with OOM kills on the way: not "for lack of memory".
  e.exit_code.reset();
  e.signal = 9;
  e.timed_out = true;
  EXPECT_THAT(OomSentence(e, 2048, "more"), ::testing::StartsWith("the OOM killer ended 1"));
  // Another signal: the command ended by itself.
  e.timed_out = false;
  e.signal = 6;
  EXPECT_THAT(OomSentence(e, 2048, "more"), ::testing::StartsWith("the OOM killer ended 1"));
}

TEST(OomSentenceTest, NothingWithoutOomKills) {
  Exec e = EndedExec();
  e.signal = 9;
  e.timed_out = false;
  e.oom_kills = 0;
  EXPECT_EQ(OomSentence(e, 512, "more"), "");
}

TEST(OomSentenceTest, SuggestsTwiceTheMemoryWithinTheLimit) {
  EXPECT_EQ(SuggestedMemoryMib(512), 1024);
  EXPECT_EQ(SuggestedMemoryMib(0), 4096);
  EXPECT_EQ(SuggestedMemoryMib(200000), 262144);
}

TEST(OutputLineTest, EncodeThenDecodeEachType) {
  absl::StatusOr<OutputLine> out =
      DecodeOutputLine(ToJson(OutputLine::Output({4, "stderr", "oops\n"})));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->type, OutputLine::Type::kOutput);
  EXPECT_EQ(out->chunk, (OutputChunk{4, "stderr", "oops\n"}));
  EXPECT_EQ(ToJson(OutputLine::Output({4, "stderr", "oops\n"}))["type"], "output");

  nlohmann::json truncated = ToJson(OutputLine::Truncated(7));
  EXPECT_EQ(truncated, nlohmann::json({{"type", "truncated"}, {"seq", 7}}));
  EXPECT_EQ(DecodeOutputLine(truncated)->type, OutputLine::Type::kTruncated);
  EXPECT_EQ(DecodeOutputLine(truncated)->chunk.seq, 7);

  absl::StatusOr<OutputLine> exit = DecodeOutputLine(ToJson(OutputLine::Exit(EndedExec())));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->type, OutputLine::Type::kExit);
  EXPECT_EQ(exit->exec, EndedExec());

  absl::StatusOr<OutputLine> other = DecodeOutputLine({{"type", "progress"}, {"pct", 5}});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->type, OutputLine::Type::kOther);
  EXPECT_EQ(other->type_name, "progress");
  absl::StatusOr<OutputLine> bad = DecodeOutputLine({{"type", "exit"}, {"exec", {{"state", 0}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(FieldOf(bad.status()).value_or(""), "exec.state");
}

}  // namespace
}  // namespace abox::api
