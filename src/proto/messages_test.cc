#include "src/proto/messages.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::proto {
namespace {

TEST(MessagesTest, ExecRequestRoundTrip) {
  ExecRequest r;
  r.argv = {"ls", "-l", "/tmp dir"};
  r.env = {{"A", "1"}, {"B", "x=y"}};
  r.cwd = "/workspace";
  r.user = "root";
  r.timeout_ms = 1500;
  r.stdin_open = true;
  r.pty = PtySize{40, 120};
  r.kill_leftovers = true;
  auto d = DecodeExecRequest(EncodeExecRequest(r));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->argv, r.argv);
  EXPECT_FALSE(d->shell.has_value());
  EXPECT_EQ(d->env, r.env);
  EXPECT_EQ(d->cwd, "/workspace");
  EXPECT_EQ(d->user, "root");
  EXPECT_EQ(d->timeout_ms, 1500u);
  EXPECT_TRUE(d->stdin_open);
  ASSERT_TRUE(d->pty.has_value());
  EXPECT_EQ(d->pty->rows, 40);
  EXPECT_EQ(d->pty->cols, 120);
  EXPECT_TRUE(d->kill_leftovers);

  ExecRequest s;
  s.shell = "echo $HOME";
  auto ds = DecodeExecRequest(EncodeExecRequest(s));
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ds->shell, "echo $HOME");
  EXPECT_TRUE(ds->argv.empty());
  EXPECT_FALSE(ds->kill_leftovers);
  EXPECT_EQ(EncodeExecRequest(s).find("kill_leftovers"), std::string::npos);
}

TEST(MessagesTest, ExecRequestRejectsBadInput) {
  for (const char* bad :
       {"", "[]", "{", "{\"argv\":[]}", "{\"argv\":\"ls\"}", "{\"argv\":[1]}", "{\"argv\":[\"\"]}",
        "{\"argv\":[\"a\"],\"shell\":\"b\"}", "{}", "{\"argv\":[\"a\"],\"env\":{\"A=B\":\"c\"}}",
        "{\"argv\":[\"a\"],\"env\":{\"A\":1}}", "{\"argv\":[\"a\"],\"user\":\"mallory\"}",
        "{\"argv\":[\"a\"],\"timeout_ms\":-1}", "{\"argv\":[\"a\"],\"unknown\":1}",
        "{\"argv\":[\"a\"],\"pty\":{\"rows\":99999}}", "{\"argv\":[\"a\\u0000b\"]}",
        "{\"argv\":[\"a\"],\"kill_leftovers\":1}"}) {
    EXPECT_FALSE(DecodeExecRequest(bad).ok()) << bad;
  }
}

TEST(MessagesTest, ExitInfoRoundTripAndValidation) {
  ExitInfo e;
  e.signal = 9;
  e.timed_out = true;
  e.duration_us = 42;
  auto d = DecodeExitInfo(EncodeExitInfo(e));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->signal, 9);
  EXPECT_FALSE(d->exit_code.has_value());
  EXPECT_TRUE(d->timed_out);
  EXPECT_EQ(d->ShellCode(), 137);
  EXPECT_FALSE(DecodeExitInfo("{\"exit_code\":256}").ok());
  EXPECT_FALSE(DecodeExitInfo("{\"exit_code\":1,\"signal\":2}").ok());
  EXPECT_FALSE(DecodeExitInfo("{\"signal\":0}").ok());
  EXPECT_FALSE(DecodeExitInfo("{\"exit_code\":\"1\"}").ok());
  auto ok = DecodeExitInfo("{\"exit_code\":127,\"error\":\"foo: command not found\"}");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->ShellCode(), 127);
  EXPECT_EQ(ok->error, "foo: command not found");
}

TEST(MessagesTest, ExitInfoCarriesOomKillsWhenThereWereAny) {
  ExitInfo e;
  e.signal = 9;
  e.oom_kills = 3;
  auto d = DecodeExitInfo(EncodeExitInfo(e));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->oom_kills, 3u);
  EXPECT_EQ(d->signal, 9);

  // None: not on the wire at all, so a host from before the field reads it unchanged.
  e.oom_kills = 0;
  EXPECT_EQ(EncodeExitInfo(e).find("oom_kills"), std::string::npos);
  // An agent from before the field sends none: 0.
  auto old = DecodeExitInfo(R"({"signal":9,"duration_us":5})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->oom_kills, 0u);
  auto zero = DecodeExitInfo(R"({"exit_code":0,"oom_kills":0})");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->oom_kills, 0u);
  auto most = DecodeExitInfo(absl::StrCat(R"({"exit_code":0,"oom_kills":)", kMaxOomKills, "}"));
  ASSERT_TRUE(most.ok());
  EXPECT_EQ(most->oom_kills, kMaxOomKills);

  // The encoder never sends more than the decoder takes.
  e.oom_kills = kMaxOomKills + 5;
  auto clamped = DecodeExitInfo(EncodeExitInfo(e));
  ASSERT_TRUE(clamped.ok()) << clamped.status();
  EXPECT_EQ(clamped->oom_kills, kMaxOomKills);
}

TEST(MessagesTest, ExitInfoRefusesHostileOomKills) {
  for (const std::string& bad : std::vector<std::string>{
           R"({"exit_code":0,"oom_kills":-1})",
           R"({"exit_code":0,"oom_kills":1.5})",
           R"({"exit_code":0,"oom_kills":"3"})",
           R"({"exit_code":0,"oom_kills":null})",
           R"({"exit_code":0,"oom_kills":[1]})",
           R"({"exit_code":0,"oom_kills":18446744073709551615})",
           R"({"exit_code":0,"oom_kills":99999999999999999999999})",
           absl::StrCat(R"({"exit_code":0,"oom_kills":)", kMaxOomKills + 1, "}"),
       }) {
    absl::StatusOr<ExitInfo> d = DecodeExitInfo(bad);
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) {
      EXPECT_THAT(std::string(d.status().message()), ::testing::HasSubstr("oom_kills")) << bad;
    }
  }
}

TEST(MessagesTest, HelloNegotiation) {
  Hello ours{.version = 3, .min_version = 1};
  Hello theirs{.version = 2, .min_version = 2};
  auto v = NegotiateVersion(ours, theirs);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 2u);
  Hello old{.version = 1, .min_version = 1};
  Hello fresh{.version = 5, .min_version = 4};
  auto bad = NegotiateVersion(old, fresh);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("4-5"), absl::string_view::npos);
  EXPECT_FALSE(
      DecodeHello("{\"version\":1,\"min_version\":2,\"max_payload\":1,\"window\":1}").ok());
  EXPECT_FALSE(DecodeHello("{\"version\":1}").ok());
}

TEST(MessagesTest, ErrorTextIsSanitized) {
  auto t = DecodeError(EncodeError("bad\x1b[31mthing\n"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "bad?[31mthing?");
  EXPECT_FALSE(DecodeError(std::string("{\"error\":\"") + std::string(5000, 'a') + "\"}").ok());
}

TEST(MessagesTest, SignalAndResize) {
  auto s = DecodeSignal(EncodeSignal(15));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, 15);
  EXPECT_FALSE(DecodeSignal("{\"signal\":65}").ok());
  auto r = DecodeResize(EncodeResize({.rows = 10, .cols = 20}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 10);
  EXPECT_EQ(r->cols, 20);
}

TEST(MessagesTest, TunnelRequestRoundTrip) {
  TunnelRequest tcp{.kind = TunnelKind::kTcp, .dst = "93.184.215.14", .port = 443};
  auto d = DecodeTunnelRequest(EncodeTunnelRequest(tcp));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind, TunnelKind::kTcp);
  EXPECT_EQ(d->dst, "93.184.215.14");
  EXPECT_EQ(d->port, 443);
  auto v6 = DecodeTunnelRequest(R"({"kind":"tcp","dst":"2001:db8::1","port":22})");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->dst, "2001:db8::1");
  for (TunnelKind kind : {TunnelKind::kProxy, TunnelKind::kDns}) {
    TunnelRequest r{.kind = kind, .dst = "ignored", .port = 1};
    std::string wire = EncodeTunnelRequest(r);
    EXPECT_EQ(wire.find("dst"), std::string::npos) << wire;  // only tcp carries an address
    auto back = DecodeTunnelRequest(wire);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->kind, kind);
    EXPECT_TRUE(back->dst.empty());
    EXPECT_EQ(back->port, 0);
  }
  EXPECT_STREQ(TunnelKindName(TunnelKind::kProxy), "proxy");
}

TEST(MessagesTest, TunnelRequestRejectsBadInput) {
  for (const char* bad : {
           "",
           "[]",
           "{}",
           R"({"kind":"udp"})",
           R"({"kind":1})",
           R"({"kind":"dns","extra":1})",
           R"({"kind":"dns","dst":"1.2.3.4"})",  // dst only with tcp
           R"({"kind":"proxy","port":80})",      // port only with tcp
           R"({"kind":"tcp"})",                  // tcp needs both
           R"({"kind":"tcp","dst":"1.2.3.4"})",
           R"({"kind":"tcp","port":80})",
           R"({"kind":"tcp","dst":"example.com","port":80})",  // names are not addresses
           R"({"kind":"tcp","dst":"127.1","port":80})",        // no inet_aton shorthands
           R"({"kind":"tcp","dst":"[::1]","port":80})",
           R"({"kind":"tcp","dst":"fe80::1%eth0","port":80})",
           R"({"kind":"tcp","dst":"1.2.3.4\u0000","port":80})",
           R"({"kind":"tcp","dst":"1.2.3.4","port":0})",
           R"({"kind":"tcp","dst":"1.2.3.4","port":65536})",
           R"({"kind":"tcp","dst":"1.2.3.4","port":-1})",
           R"({"kind":"tcp","dst":"1.2.3.4","port":"80"})",
       }) {
    EXPECT_FALSE(DecodeTunnelRequest(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace abox::proto
