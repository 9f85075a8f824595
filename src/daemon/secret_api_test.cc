// /v1/secrets in-process (fixture: testing/daemon_api_fixture.h, whose daemon keeps stored
// values in a 0600 file in its home): set from a value, a command or (refused) nothing; list,
// get, replace, remove; values never in an answer, SQLite or the log.
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/daemon/testing/daemon_api_fixture.h"

namespace abox::daemon {
namespace {

using testing::DaemonApiTest;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kValue[] = "ghp_realvalue0123456789abcdef";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json Spec(const std::string& name, nlohmann::json source = {{"kind", "stored"}}) {
  return {{"name", name}, {"hosts", {"api.github.com"}}, {"source", std::move(source)}};
}

TEST_F(DaemonApiTest, StoredSecretsAreSetListedReplacedAndRemovedWithoutTheirValue) {
  http::httptest::Response set = Call(
      "POST", "/v1/secrets", nlohmann::json{{"spec", Spec("GH_TOKEN")}, {"value", kValue}}.dump());
  ASSERT_EQ(set.status, 201) << set.body;
  EXPECT_EQ(set.Json()["name"], "GH_TOKEN");
  EXPECT_EQ(set.Json()["source"], "stored");
  EXPECT_THAT(set.Json()["stored_in"].get<std::string>(), HasSubstr("file "));
  EXPECT_EQ(set.Json()["spec"]["format"], "Bearer {}");  // the defaults filled in
  EXPECT_THAT(set.body, Not(HasSubstr(kValue)));

  http::httptest::Response listed = Call("GET", "/v1/secrets");
  ASSERT_EQ(listed.status, 200);
  ASSERT_EQ(listed.Json()["secrets"].size(), 1u);
  EXPECT_THAT(listed.body, Not(HasSubstr(kValue)));
  EXPECT_EQ(Call("GET", "/v1/secrets/GH_TOKEN").Json()["spec"]["hosts"],
            nlohmann::json({"api.github.com"}));

  // The value is in the 0600 file store, and nowhere in the state database or the daemon log.
  const std::string values = dir_.path() + "/secrets/values.json";
  struct stat st {};
  ASSERT_EQ(::stat(values.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // (SQLite in WAL mode: the newest pages are in the -wal file.)
  const std::string db =
      ReadAll(dir_.path() + "/state.db") + ReadAll(dir_.path() + "/state.db-wal");
  EXPECT_THAT(db, Not(HasSubstr(kValue)));
  EXPECT_THAT(db, HasSubstr("api.github.com"));

  // Replaced: new hosts, created_at kept.
  nlohmann::json spec = Spec("GH_TOKEN");
  spec["hosts"] = {"api.github.com", "uploads.github.com"};
  http::httptest::Response again = Call(
      "POST", "/v1/secrets", nlohmann::json{{"spec", spec}, {"value", "other-value-1"}}.dump());
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.Json()["created_at"], set.Json()["created_at"]);
  EXPECT_EQ(again.Json()["spec"]["hosts"].size(), 2u);

  EXPECT_EQ(Call("DELETE", "/v1/secrets/GH_TOKEN").status, 204);
  http::httptest::Response gone = Call("DELETE", "/v1/secrets/GH_TOKEN");
  EXPECT_EQ(gone.status, 404);
  EXPECT_THAT(gone.body, HasSubstr("no secret named GH_TOKEN"));
  EXPECT_TRUE(Call("GET", "/v1/secrets").Json()["secrets"].empty());
  EXPECT_THAT(ReadAll(values), Not(HasSubstr("GH_TOKEN")));
}

TEST_F(DaemonApiTest, BadSecretsAreRefusedWithWhatToDo) {
  auto post = [&](const nlohmann::json& body) { return Call("POST", "/v1/secrets", body.dump()); };
  http::httptest::Response no_value = post({{"spec", Spec("GH_TOKEN")}});
  EXPECT_EQ(no_value.status, 400);
  EXPECT_THAT(no_value.body, HasSubstr("--from-env"));

  http::httptest::Response bad_name = post({{"spec", Spec("gh-token")}, {"value", kValue}});
  EXPECT_EQ(bad_name.status, 400);
  EXPECT_THAT(bad_name.body, Not(HasSubstr(kValue)));

  nlohmann::json wide = Spec("WIDE");
  wide["hosts"] = {"*.com"};
  EXPECT_EQ(post({{"spec", wide}, {"value", kValue}}).status, 400);

  http::httptest::Response two_lines =
      post({{"spec", Spec("TWO")}, {"value", std::string("line1\nline2")}});
  EXPECT_EQ(two_lines.status, 400);
  EXPECT_THAT(two_lines.body, HasSubstr("line break"));
  EXPECT_THAT(two_lines.body, Not(HasSubstr("line1")));

  // A command source takes no value, and is read once to check it works.
  nlohmann::json failing = {{"kind", "command"},
                            {"argv", {"/bin/sh", "-c", "echo nope >&2; exit 3"}}};
  http::httptest::Response broken = post({{"spec", Spec("CMD", failing)}});
  EXPECT_NE(broken.status, 201);
  EXPECT_THAT(broken.body, HasSubstr("reading secret CMD from its command failed"));
  EXPECT_THAT(broken.body, HasSubstr("nope"));
  nlohmann::json works = {{"kind", "command"}, {"argv", {"/bin/echo", "from-a-command"}}};
  EXPECT_EQ(post({{"spec", Spec("CMD", works)}, {"value", kValue}}).status, 400);
  http::httptest::Response ok = post({{"spec", Spec("CMD", works)}});
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(ok.Json()["source"], "command");
  EXPECT_EQ(ok.Json()["stored_in"], "");

  // Nothing refused was kept.
  nlohmann::json all = Call("GET", "/v1/secrets").Json()["secrets"];
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["name"], "CMD");
}

}  // namespace
}  // namespace abox::daemon
