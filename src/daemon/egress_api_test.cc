// The egress routes end to end in-process (fixture: testing/egress_api_fixture.h): policies read,
// written and validated, a change reaching a running sandbox, approvals and the review queue,
// loopback and private addresses, mode none. The setup phase: egress_setup_test.cc.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/daemon/testing/egress_api_fixture.h"
#include "src/net/testing/socket_tunnel.h"

namespace abox::daemon {
namespace {

using http::httptest::Response;
using net::testing::FakeHttpUpstream;
using net::testing::SocketTunnel;
using testing::EgressApiTest;
using ::testing::HasSubstr;
using testing::kUpstream;
using ::testing::Not;

TEST_F(EgressApiTest, PoliciesAreReadWrittenAndValidated) {
  StartDaemon();
  nlohmann::json global = Call("GET", "/v1/egress/policy").Json();
  EXPECT_EQ(global["mode"], "allowlist");
  EXPECT_TRUE(global["allow"].empty());
  Response put = Call("PUT", "/v1/egress/policy",
                      {{"mode", "allowlist"}, {"allow", {"preset:pypi", "Example.COM:80"}}});
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(put.Json()["allow"], nlohmann::json({"preset:pypi", "example.com:80"}));

  Response bad = Call("PUT", "/v1/egress/policy", {{"allow", {"api.github.com", "*.com"}}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("allow[1]"));
  EXPECT_THAT(bad.body, HasSubstr("*.com"));
  Response preset = Call("POST", "/v1/egress/rules", {{"add", {"preset:nosuch"}}});
  EXPECT_EQ(preset.status, 400);
  EXPECT_THAT(preset.body, HasSubstr("pypi"));  // the known presets are listed
  EXPECT_EQ(Call("PUT", "/v1/egress/policy", {{"mode", "wide"}}).status, 400);

  // A bad rule in a create is refused before anything exists.
  Response refused =
      Call("POST", "/v1/sandboxes", {{"egress", {{"allow", {"ok.example", "pypi"}}}}});
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("egress.allow[1]"));
  EXPECT_THAT(refused.body, HasSubstr("preset:pypi"));
  EXPECT_TRUE(Call("GET", "/v1/sandboxes?state=failed").Json()["sandboxes"].empty());

  std::string id = Create({{"egress", {{"mode", "none"}, {"allow", {"api.github.com"}}}}});
  EXPECT_EQ(Call("GET", absl::StrCat("/v1/sandboxes/", id)).Json()["egress"]["mode"], "none");
  nlohmann::json own = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/egress/policy")).Json();
  EXPECT_EQ(own["mode"], "none");
  EXPECT_EQ(own["allow"], nlohmann::json({"api.github.com"}));
  EXPECT_EQ(own["effective"]["allow"],
            nlohmann::json({"preset:pypi", "example.com:80", "api.github.com"}));

  std::string rules = absl::StrCat("/v1/sandboxes/", id, "/egress/rules");
  Response added = Call(
      "POST", rules, {{"add", {"*.npmjs.org", "api.github.com"}}, {"remove", {"api.github.com"}}});
  ASSERT_EQ(added.status, 200) << added.body;
  EXPECT_EQ(added.Json()["allow"], nlohmann::json({"*.npmjs.org", "api.github.com"}));
  Response missing = Call("POST", rules, {{"remove", {"gone.example"}}});
  EXPECT_EQ(missing.status, 404);
  EXPECT_THAT(missing.body, HasSubstr("gone.example"));
  EXPECT_THAT(missing.body, HasSubstr("*.npmjs.org"));  // what it has instead

  // Mode null: the global mode again.
  Response inherit = Call("PUT", absl::StrCat("/v1/sandboxes/", id, "/egress/policy"),
                          {{"mode", nullptr}, {"allow", nlohmann::json::array()}});
  ASSERT_EQ(inherit.status, 200) << inherit.body;
  EXPECT_TRUE(inherit.Json()["mode"].is_null());
  EXPECT_EQ(Call("GET", absl::StrCat("/v1/sandboxes/", id)).Json()["egress"]["mode"], "allowlist");
  EXPECT_EQ(Call("GET", "/v1/sandboxes/nosuch/egress/policy").status, 404);
  EXPECT_EQ(Call("GET", absl::StrCat("/v1/sandboxes/", id, "/egress/log?limit=0")).status, 400);
}

TEST_F(EgressApiTest, APolicyChangeReachesARunningSandboxAtItsNextConnection) {
  StartDaemon();
  FakeHttpUpstream upstream;
  std::string id = Create();
  std::string denied = Fetch(id, upstream.port());
  EXPECT_THAT(denied, HasSubstr("403"));
  EXPECT_THAT(denied, HasSubstr("abox egress approve"));
  EXPECT_EQ(upstream.accepted(), 0);

  nlohmann::json queue = Queue();
  ASSERT_EQ(queue.size(), 1u) << queue.dump();
  EXPECT_EQ(queue[0]["name"], kUpstream);
  EXPECT_EQ(queue[0]["port"], upstream.port());
  EXPECT_EQ(queue[0]["sandbox"], id);
  std::vector<std::string> events = EventTypes(id);
  EXPECT_THAT(events, ::testing::Contains("egress_denied"));
  EXPECT_THAT(events, ::testing::Contains("egress_pending"));

  // The global policy changes; the running sandbox sees it without a restart.
  ASSERT_EQ(
      Call("POST", "/v1/egress/rules", {{"add", {absl::StrCat(kUpstream, ":", upstream.port())}}})
          .status,
      200);
  std::string allowed = Fetch(id, upstream.port());
  EXPECT_THAT(allowed, HasSubstr("200 OK"));
  EXPECT_THAT(allowed, HasSubstr("hello"));

  nlohmann::json log = LogWith(id, 2);
  ASSERT_EQ(log["connections"].size(), 2u) << log.dump();
  nlohmann::json newest = log["connections"][0];
  EXPECT_EQ(newest["verdict"], "allowed");
  EXPECT_EQ(newest["name"], kUpstream);
  EXPECT_EQ(newest["address"], "127.0.0.1");
  EXPECT_EQ(newest["port"], upstream.port());
  EXPECT_EQ(newest["via_override"], true);
  EXPECT_GT(newest["bytes_up"].get<int64_t>(), 0);
  EXPECT_GT(newest["bytes_down"].get<int64_t>(), 0);
  EXPECT_EQ(log["connections"][1]["verdict"], "denied");
  EXPECT_EQ(Call("GET", absl::StrCat("/v1/sandboxes/", id, "/egress/log?limit=1"))
                .Json()["connections"]
                .size(),
            1u);
}

TEST_F(EgressApiTest, ApprovalsOnceAllowOneConnectionAndAlwaysAddARule) {
  StartDaemon();
  FakeHttpUpstream upstream;
  std::string id = Create();
  ASSERT_THAT(Fetch(id, upstream.port()), HasSubstr("403"));
  std::string approve = absl::StrCat("/v1/sandboxes/", id, "/egress/approve");

  std::string name_port = absl::StrCat(kUpstream, ":", upstream.port());
  Response once = Call("POST", approve, {{"name", name_port}, {"once", true}});
  ASSERT_EQ(once.status, 200) << once.body;
  EXPECT_EQ(once.Json()["request"]["state"], "approved_once");
  EXPECT_EQ(once.Json()["request"]["once_port"], upstream.port());
  EXPECT_FALSE(once.Json().contains("note"));
  EXPECT_TRUE(Queue().empty());
  EXPECT_THAT(Fetch(id, upstream.port()), HasSubstr("hello"));
  // Used up: the next connection is refused and asks again.
  EXPECT_THAT(Fetch(id, upstream.port()), HasSubstr("403"));
  ASSERT_EQ(Queue().size(), 1u);
  EXPECT_EQ(Queue()[0]["state"], "pending");

  Response always = Call("POST", approve, {{"name", name_port}, {"once", false}});
  ASSERT_EQ(always.status, 200) << always.body;
  std::string rule = absl::StrCat(kUpstream, ":", upstream.port());
  EXPECT_EQ(always.Json()["rule"], rule);
  nlohmann::json policy = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/egress/policy")).Json();
  EXPECT_EQ(policy["allow"], nlohmann::json({rule}));
  EXPECT_THAT(Fetch(id, upstream.port()), HasSubstr("hello"));
  EXPECT_THAT(Fetch(id, upstream.port()), HasSubstr("hello"));
  EXPECT_TRUE(Queue().empty());
  EXPECT_EQ(upstream.accepted(), 3);

  // Raw TCP has no one-shot approval; a bad name is a 400.
  Response address = Call("POST", approve, {{"name", "192.0.2.10:5432"}});
  EXPECT_EQ(address.status, 400);
  EXPECT_THAT(address.body, HasSubstr("--always"));
  EXPECT_EQ(Call("POST", approve, {{"name", "bad name!"}}).status, 400);
  EXPECT_EQ(Call("POST", approve, {{"name", "x.example:99999"}}).status, 400);
}

TEST_F(EgressApiTest, AnApprovalWithoutAPortIsForTheDefaultPortNeverTheGuests) {
  StartDaemon();
  FakeHttpUpstream upstream;
  std::string id = Create();
  // The guest asked for upstream.test on its own port; a person approves the bare name.
  ASSERT_THAT(Fetch(id, upstream.port()), HasSubstr("403"));
  std::string approve = absl::StrCat("/v1/sandboxes/", id, "/egress/approve");
  Response once = Call("POST", approve, {{"name", kUpstream}, {"once", true}});
  ASSERT_EQ(once.status, 200) << once.body;
  EXPECT_EQ(once.Json()["request"]["once_port"], 443);
  EXPECT_THAT(once.Json()["note"].get<std::string>(),
              HasSubstr(absl::StrCat("the sandbox asked for port ", upstream.port())));
  EXPECT_THAT(Fetch(id, upstream.port()), HasSubstr("403"));

  Response always = Call("POST", approve, {{"name", kUpstream}, {"once", false}});
  ASSERT_EQ(always.status, 200) << always.body;
  EXPECT_EQ(always.Json()["rule"], kUpstream);  // port 443
  EXPECT_THAT(always.Json()["note"].get<std::string>(),
              HasSubstr(absl::StrCat(kUpstream, ":", upstream.port())));
  EXPECT_THAT(Fetch(id, upstream.port()), HasSubstr("403"));
  EXPECT_EQ(upstream.accepted(), 0);

  // An address is never approved on the port its connection used: the person writes it.
  Response address = Call("POST", approve, {{"name", "192.0.2.10"}, {"once", false}});
  EXPECT_EQ(address.status, 400);
  EXPECT_THAT(address.body, HasSubstr("give the port"));
  // Single-label names cannot be approved (the host would resolve them under its search
  // domains); neither can loopback addresses (the host's own).
  Response single = Call("POST", approve, {{"name", "db"}, {"once", true}});
  EXPECT_EQ(single.status, 400);
  EXPECT_THAT(single.body, HasSubstr("not a fully qualified name"));
  Response loopback = Call("POST", approve, {{"name", "127.0.0.1:5432"}, {"once", false}});
  EXPECT_EQ(loopback.status, 400);
  EXPECT_THAT(loopback.body, HasSubstr("--allow-loopback"));
  nlohmann::json policy = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/egress/policy")).Json();
  EXPECT_EQ(policy["allow"], nlohmann::json({kUpstream}));
}

TEST_F(EgressApiTest, LoopbackAddressRulesNeedAllowLoopbackAndWarn) {
  StartDaemon();
  std::string id = Create();
  std::string rules = absl::StrCat("/v1/sandboxes/", id, "/egress/rules");
  for (const char* rule :
       {"127.0.0.1:5432", "127.8.9.10:80", "[::1]:22", "[::ffff:127.0.0.1]:22"}) {
    Response refused = Call("POST", rules, {{"add", {rule}}});
    EXPECT_EQ(refused.status, 400) << rule;
    EXPECT_THAT(refused.body, HasSubstr("--allow-loopback")) << rule;
  }
  Response put = Call("PUT", "/v1/egress/policy", {{"mode", "allowlist"}, {"allow", {"[::1]:22"}}});
  EXPECT_EQ(put.status, 400);
  nlohmann::json policy = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/egress/policy")).Json();
  EXPECT_TRUE(policy["allow"].empty());

  Response added = Call("POST", rules, {{"add", {"127.0.0.1:5432"}}, {"allow_loopback", true}});
  ASSERT_EQ(added.status, 200) << added.body;
  EXPECT_EQ(added.Json()["allow"], nlohmann::json({"127.0.0.1:5432"}));
  ASSERT_EQ(added.Json()["warnings"].size(), 1u);
  EXPECT_THAT(added.Json()["warnings"][0].get<std::string>(), HasSubstr("HOST's loopback"));
  // Stored, it reads back without the flag; removing it needs none either.
  policy = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/egress/policy")).Json();
  EXPECT_EQ(policy["allow"], nlohmann::json({"127.0.0.1:5432"}));
  Response removed = Call("POST", rules, {{"remove", {"127.0.0.1:5432"}}});
  EXPECT_EQ(removed.status, 200) << removed.body;
  EXPECT_FALSE(removed.Json().contains("warnings"));
}

TEST_F(EgressApiTest, DeniedAndIgnoredNamesLeaveTheQueueAndStayDenied) {
  StartDaemon();
  FakeHttpUpstream upstream;
  std::string id = Create();
  ASSERT_THAT(Fetch(id, upstream.port()), HasSubstr("403"));
  Response deny =
      Call("POST", absl::StrCat("/v1/sandboxes/", id, "/egress/deny"), {{"name", kUpstream}});
  ASSERT_EQ(deny.status, 200) << deny.body;
  EXPECT_EQ(deny.Json()["request"]["state"], "denied");
  EXPECT_TRUE(Queue().empty());
  EXPECT_THAT(Fetch(id, upstream.port()), HasSubstr("403"));
  EXPECT_TRUE(Queue().empty()) << "a denied name came back";

  // Another sandbox asks for the same name; ignoring it takes it out of every queue.
  std::string other = Create();
  ASSERT_THAT(Fetch(other, upstream.port()), HasSubstr("403"));
  ASSERT_EQ(Queue().size(), 1u);
  Response ignore = Call("POST", "/v1/egress/ignore", {{"name", "UPSTREAM.test"}});
  ASSERT_EQ(ignore.status, 200) << ignore.body;
  EXPECT_EQ(ignore.Json()["requests_changed"], 1);
  EXPECT_TRUE(Queue().empty());
  EXPECT_THAT(Fetch(other, upstream.port()), HasSubstr("403"));
  EXPECT_TRUE(Queue().empty());
  nlohmann::json all = Queue(absl::StrCat("?all=true&sandbox=", other));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["state"], "ignored");
  EXPECT_EQ(all[0]["count"], 2);
  EXPECT_EQ(upstream.accepted(), 0);
  EXPECT_EQ(Call("GET", "/v1/egress/queue?bogus=1").status, 400);
}

// An agent asks for a name with a reason: it waits in the queue with the reason until a person
// approves it; nothing is allowed by the ask itself.
TEST_F(EgressApiTest, AnAgentsAskWaitsInTheQueueWithItsReasonUntilAPersonDecides) {
  StartDaemon();
  FakeHttpUpstream upstream;
  std::string id = Create();
  std::string ask = absl::StrCat("/v1/sandboxes/", id, "/egress/ask");
  std::string name_port = absl::StrCat(kUpstream, ":", upstream.port());
  Response asked =
      Call("POST", ask, {{"name", name_port}, {"reason", "fetch the test fixtures\n\x1b[31m"}});
  ASSERT_EQ(asked.status, 200) << asked.body;
  EXPECT_EQ(asked.Json()["request"]["state"], "pending");
  EXPECT_EQ(asked.Json()["allowed"], false);
  EXPECT_EQ(asked.Json()["queue_full"], false);
  ASSERT_EQ(Queue().size(), 1u);
  EXPECT_EQ(Queue()[0]["name"], "upstream.test");
  EXPECT_EQ(Queue()[0]["port"], upstream.port());
  // The guest's text, one printable line.
  EXPECT_EQ(Queue()[0]["reason"], "asked by the agent: fetch the test fixtures  [31m");
  // Asking is not allowing.
  EXPECT_THAT(Fetch(id, upstream.port()), HasSubstr("403"));
  EXPECT_EQ(upstream.accepted(), 0);

  ASSERT_EQ(Call("POST", absl::StrCat("/v1/sandboxes/", id, "/egress/approve"),
                 {{"name", name_port}, {"once", false}})
                .status,
            200);
  EXPECT_TRUE(Queue().empty());
  EXPECT_THAT(Fetch(id, upstream.port()), HasSubstr("hello"));
  // Asking again for what the policy allows queues nothing.
  Response again = Call("POST", ask, {{"name", name_port}, {"reason", "again"}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.Json()["allowed"], true);
  EXPECT_TRUE(Queue().empty());

  // A denial stands: asking does not reopen it.
  ASSERT_EQ(
      Call("POST", absl::StrCat("/v1/sandboxes/", id, "/egress/deny"), {{"name", "other.example"}})
          .status,
      200);
  Response denied = Call("POST", ask, {{"name", "other.example"}, {"reason", "please"}});
  ASSERT_EQ(denied.status, 200) << denied.body;
  EXPECT_EQ(denied.Json()["request"]["state"], "denied");
  EXPECT_TRUE(Queue().empty());

  // Bad asks say what is wrong.
  EXPECT_EQ(Call("POST", ask, {{"name", "x.example"}}).status, 400);  // no reason
  EXPECT_EQ(Call("POST", ask, {{"name", "x.example"}, {"reason", "  "}}).status, 400);
  Response address = Call("POST", ask, {{"name", "192.0.2.10"}, {"reason", "db"}});
  EXPECT_EQ(address.status, 400);
  EXPECT_THAT(address.body, HasSubstr("ADDRESS:PORT"));
  EXPECT_EQ(Call("POST", ask, {{"name", "bad name!"}, {"reason", "x"}}).status, 400);
  EXPECT_EQ(Call("POST", ask, {{"name", "x.example"}, {"reason", std::string(501, 'r')}}).status,
            400);
  EXPECT_EQ(Call("POST", "/v1/sandboxes/nope/egress/ask", {{"name", "x.example"}, {"reason", "x"}})
                .status,
            404);
  EXPECT_TRUE(Queue().empty());
}

// A guest making up names floods only its own sandbox's review queue: past the cap every name
// is still refused (403) and logged, but counted instead of queued, and the API and the other
// sandbox's queue say so.
TEST_F(EgressApiTest, AGuestMakingUpNamesFillsOnlyItsOwnQueueAndTheDropsAreCounted) {
  StartDaemon();
  std::string flooder = Create();
  std::string other = Create();
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT(FetchHost(other, absl::StrCat("other", i, ".example.org")), HasSubstr("403"));
  }
  const int64_t cap = daemon_->egress().queue_cap();
  const int64_t flood = cap + 50;
  for (int64_t i = 0; i < flood; ++i) {
    ASSERT_THAT(FetchHost(flooder, absl::StrCat("x", i, ".exfil.example")), HasSubstr("403"));
  }
  nlohmann::json log;
  for (int i = 0; i < 200; ++i) {
    log = Call("GET", absl::StrCat("/v1/sandboxes/", flooder, "/egress/log?limit=1")).Json();
    if (log["dropped"]["queue"] == 50) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(log["dropped"]["queue"], 50) << log.dump();
  EXPECT_EQ(Queue(absl::StrCat("?sandbox=", flooder)).size(), static_cast<size_t>(cap));
  nlohmann::json theirs = Queue(absl::StrCat("?sandbox=", other));
  EXPECT_EQ(theirs.size(), 3u) << theirs.dump();
  nlohmann::json queue = Call("GET", "/v1/egress/queue").Json();
  EXPECT_EQ(queue["queue_cap"], cap);
  ASSERT_EQ(queue["queue_full"].size(), 1u) << queue.dump();
  EXPECT_EQ(queue["queue_full"][0]["sandbox"], flooder);
  EXPECT_EQ(queue["queue_full"][0]["dropped"], 50);
  nlohmann::json their_log =
      Call("GET", absl::StrCat("/v1/sandboxes/", other, "/egress/log")).Json();
  EXPECT_EQ(their_log["dropped"],
            nlohmann::json({{"queue", 0}, {"connections", 0}, {"dns", 0}, {"events", 0}}));
  EXPECT_EQ(their_log["connections"].size(), 3u);
  // The sandbox itself says what it lost (abox inspect shows it); the other lost nothing.
  nlohmann::json flooded = Call("GET", "/v1/sandboxes/" + flooder).Json();
  EXPECT_EQ(flooded["dropped"]["queue"], 50) << flooded.dump();
  EXPECT_FALSE(Call("GET", "/v1/sandboxes/" + other).Json().contains("dropped"));
}

TEST_F(EgressApiTest, ModeNoneResetsEveryTunnelWithoutAProxyThread) {
  StartDaemon();
  std::string id = Create({{"egress", {{"mode", "none"}}}});
  net::TunnelInfo info;
  info.kind = net::TunnelInfo::Kind::kDns;
  auto [tunnel, guest] = SocketTunnel::Make(info);
  std::shared_ptr<net::testing::TunnelObservations> seen = tunnel->observations();
  daemon_->egress().Handle(id, std::move(tunnel));
  std::lock_guard lock(seen->mu);
  EXPECT_TRUE(seen->reset);
  EXPECT_THAT(seen->reset_reason, HasSubstr("mode none"));
}

TEST_F(EgressApiTest, APrivateAddressGetsThroughOnlyByTheOverride) {
  // Without the override, a lookup that answers 127.0.0.1 (as a rebinding DNS server would) is
  // refused by the address filter even though the policy allows the name.
  StartDaemon(/*override_upstream=*/false, [](const std::string&, absl::Time) {
    return absl::StatusOr<std::vector<net::IpAddress>>(
        std::vector<net::IpAddress>{*net::IpAddress::Parse("127.0.0.1")});
  });
  FakeHttpUpstream upstream;
  std::string id =
      Create({{"egress", {{"allow", {absl::StrCat(kUpstream, ":", upstream.port())}}}}});
  std::string answer = Fetch(id, upstream.port());
  EXPECT_THAT(answer, HasSubstr("403"));
  EXPECT_THAT(answer, Not(HasSubstr("hello")));
  EXPECT_EQ(upstream.accepted(), 0);
  nlohmann::json log = LogWith(id, 1);
  ASSERT_EQ(log["connections"].size(), 1u);
  EXPECT_EQ(log["connections"][0]["verdict"], "denied");
  EXPECT_EQ(log["connections"][0]["via_override"], false);
  EXPECT_THAT(log["connections"][0]["reason"].get<std::string>(), HasSubstr("127.0.0.1"));
}

}  // namespace
}  // namespace abox::daemon
