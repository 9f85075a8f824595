#include "src/mcp/server.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/mcp/tool_args.h"

namespace abox::mcp {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// What the server sent, one parsed message per line.
class Sent {
 public:
  void Add(const std::string& line) {
    ASSERT_FALSE(line.empty());
    ASSERT_EQ(line.back(), '\n');
    ASSERT_EQ(line.find('\n'), line.size() - 1) << "one message per line";
    std::lock_guard<std::mutex> lock(mu_);
    messages_.push_back(json::parse(line));
    cv_.notify_all();
  }
  // The first message matching `pred` (waits for it, up to 20 s; null when none came).
  json Await(const std::function<bool(const json&)>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    json found;
    cv_.wait_for(lock, std::chrono::seconds(20), [&] {
      for (const json& m : messages_) {
        if (pred(m)) {
          found = m;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  json AwaitId(const json& id) {
    return Await([&](const json& m) { return m.contains("id") && m["id"] == id; });
  }
  std::vector<json> All() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> messages_;
};

// A latch a tool waits on until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool entered = false;
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

class ServerTest : public testing::Test {
 protected:
  ServerTest() {
    std::vector<Tool> tools;
    tools.push_back(Tool{"echo", "Echo", "Returns its text.",
                         ObjectSchema({{"text", Prop("string", "t")}}, {"text"}),
                         ObjectSchema({{"text", Prop("string", "t")}}), nullptr,
                         [](const json& args, CallContext&) -> absl::StatusOr<json> {
                           return json{{"text", args["text"]}};
                         }});
    tools.push_back(Tool{"fail", "Fail", "Fails.", ObjectSchema({}), nullptr, nullptr,
                         [](const json&, CallContext&) -> absl::StatusOr<json> {
                           return absl::NotFoundError("no sandbox \"x\"");
                         }});
    tools.push_back(Tool{"block", "Block", "Waits for the gate or a cancel.", ObjectSchema({}),
                         nullptr, nullptr,
                         [this](const json&, CallContext& ctx) -> absl::StatusOr<json> {
                           CallContext::CancelHook hook(ctx, [this] {
                             hook_ran_ = true;
                             gate_.Open();
                           });
                           ctx.Progress(1, "started");
                           ctx.Progress(1, "still at one");
                           std::unique_lock<std::mutex> lock(gate_.mu);
                           gate_.entered = true;
                           gate_.cv.notify_all();
                           gate_.cv.wait(lock, [this] { return gate_.open; });
                           return json{{"done", true}};
                         }});
    tools.push_back(Tool{"ask", "Ask", "Asks the client.", ObjectSchema({}), nullptr, nullptr,
                         [](const json&, CallContext& ctx) -> absl::StatusOr<json> {
                           if (!ctx.ClientCanElicit()) {
                             return json{{"asked", false}};
                           }
                           absl::StatusOr<json> a = ctx.AskClient(
                               "elicitation/create", {{"message", "ok?"}}, absl::Seconds(20));
                           if (!a.ok()) {
                             return a.status();
                           }
                           return json{{"asked", true}, {"answer", *a}};
                         }});
    server_ = std::make_unique<Server>(ServerInfo{"abox", "9.9.9", "use it"}, std::move(tools),
                                       [this](const std::string& line) { sent_.Add(line); });
  }
  ~ServerTest() override {
    gate_.Open();
    server_->Shutdown();
  }

  void Line(const std::string& text) { server_->HandleLine(LineReader::Line{text, false}); }
  void Request(int id, const std::string& method, const json& params = nullptr) {
    json m = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
    if (!params.is_null()) {
      m["params"] = params;
    }
    Line(m.dump());
  }
  void WaitUntilBlocked() {
    std::unique_lock<std::mutex> lock(gate_.mu);
    ASSERT_TRUE(gate_.cv.wait_for(lock, std::chrono::seconds(20), [&] { return gate_.entered; }));
  }
  // The answer to request `id`, which must already have been sent.
  json AnsweredAtOnce(int id) {
    for (const json& m : sent_.All()) {
      if (m.contains("id") && m["id"] == id) {
        return m;
      }
    }
    ADD_FAILURE() << "request " << id << " was not answered at once";
    return nullptr;
  }

  Sent sent_;
  Gate gate_;
  std::atomic<bool> hook_ran_{false};
  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, InitializeEchoesASupportedVersionElseAnswersTheNewest) {
  Request(1, "initialize", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()}});
  Request(2, "initialize", {{"protocolVersion", "2025-11-25"}});
  Request(3, "initialize", {{"protocolVersion", "2024-11-05"}});
  json first = AnsweredAtOnce(1)["result"];
  EXPECT_EQ(first["protocolVersion"], "2025-06-18");
  EXPECT_EQ(AnsweredAtOnce(2)["result"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(AnsweredAtOnce(3)["result"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(first["serverInfo"]["name"], "abox");
  EXPECT_EQ(first["serverInfo"]["version"], "9.9.9");
  EXPECT_EQ(first["capabilities"]["tools"]["listChanged"], false);
  EXPECT_TRUE(first["capabilities"]["logging"].is_object());
  EXPECT_EQ(first["instructions"], "use it");
}

TEST_F(ServerTest, AToolAsksTheClientOnlyWhenItCanElicitAndGetsItsAnswer) {
  auto structured = [](const json& m) { return m["result"]["structuredContent"]; };
  Request(1, "initialize", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()}});
  Request(2, "tools/call", {{"name", "ask"}, {"arguments", json::object()}});
  EXPECT_EQ(structured(sent_.AwaitId(2))["asked"], false);

  Request(3, "initialize",
          {{"protocolVersion", "2025-11-25"}, {"capabilities", {{"elicitation", json::object()}}}});
  Request(4, "tools/call", {{"name", "ask"}, {"arguments", json::object()}});
  json ask =
      sent_.Await([](const json& m) { return m.value("method", "") == "elicitation/create"; });
  ASSERT_TRUE(ask.contains("id")) << ask.dump();
  EXPECT_EQ(ask["params"]["message"], "ok?");
  // An answer to an id nobody asked with is dropped; the real one is delivered.
  Line(json{{"jsonrpc", "2.0"}, {"id", "abox-999"}, {"result", {{"action", "cancel"}}}}.dump());
  Line(json{{"jsonrpc", "2.0"}, {"id", ask["id"]}, {"result", {{"action", "accept"}}}}.dump());
  EXPECT_EQ(structured(sent_.AwaitId(4))["answer"]["action"], "accept");

  // An error answer is the tool's error; a cancelled call stops waiting.
  Request(5, "tools/call", {{"name", "ask"}, {"arguments", json::object()}});
  json second = sent_.Await([&](const json& m) {
    return m.value("method", "") == "elicitation/create" && m["id"] != ask["id"];
  });
  Line(json{
      {"jsonrpc", "2.0"}, {"id", second["id"]}, {"error", {{"code", -32603}, {"message", "no UI"}}}}
           .dump());
  json failed = sent_.AwaitId(5);
  EXPECT_EQ(failed["result"]["isError"], true);
  EXPECT_THAT(failed["result"]["content"][0]["text"].get<std::string>(), HasSubstr("no UI"));
  Request(6, "tools/call", {{"name", "ask"}, {"arguments", json::object()}});
  ASSERT_FALSE(sent_
                   .Await([&](const json& m) {
                     return m.value("method", "") == "elicitation/create" && m["id"] != ask["id"] &&
                            m["id"] != second["id"];
                   })
                   .is_null());
  Line(json{
      {"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 6}}}}
           .dump());
  server_->Shutdown();  // returns: the cancelled call's wait ended
  for (const json& m : sent_.All()) {
    EXPECT_FALSE(m.contains("id") && m["id"] == 6 && m.contains("result")) << m.dump();
  }
}

TEST_F(ServerTest, UnknownMethodsGetMethodNotFoundAtOnceAndPingAnEmptyObject) {
  Request(1, "server/discover");
  Request(2, "ping");
  EXPECT_EQ(AnsweredAtOnce(1)["error"]["code"], kMethodNotFound);
  EXPECT_EQ(AnsweredAtOnce(2)["result"], json::object());
}

TEST_F(ServerTest, NotificationsAndResponsesGetNoAnswer) {
  Line(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  Line(R"({"jsonrpc":"2.0","method":"notifications/whatever","params":{}})");
  Line(R"({"jsonrpc":"2.0","id":99,"result":{}})");
  Line("   ");
  Request(1, "ping");
  std::vector<json> all = sent_.All();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["id"], 1);
}

TEST_F(ServerTest, MalformedAndOverLongLinesAreAnsweredWithErrors) {
  Line("{not json");
  server_->HandleLine(LineReader::Line{"", true});
  Line(R"({"jsonrpc":"2.0","id":5,"method":"ping","params":"x"})");
  std::vector<json> all = sent_.All();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]["error"]["code"], kParseError);
  EXPECT_TRUE(all[0]["id"].is_null());
  EXPECT_EQ(all[1]["error"]["code"], kInvalidRequest);
  EXPECT_THAT(all[1]["error"]["message"].get<std::string>(), HasSubstr("longer than"));
  EXPECT_EQ(all[2]["error"]["code"], kInvalidParams);
  EXPECT_EQ(all[2]["id"], 5);
}

TEST_F(ServerTest, ListsToolsWithTheirSchemas) {
  Request(1, "tools/list");
  json tools = AnsweredAtOnce(1)["result"]["tools"];
  ASSERT_EQ(tools.size(), 4u);
  EXPECT_EQ(tools[0]["name"], "echo");
  EXPECT_EQ(tools[0]["inputSchema"]["type"], "object");
  EXPECT_EQ(tools[0]["outputSchema"]["type"], "object");
  EXPECT_FALSE(tools[1].contains("outputSchema"));
}

TEST_F(ServerTest, AToolResultCarriesStructuredContentAndTheSameJsonAsText) {
  Request(1, "tools/call", {{"name", "echo"}, {"arguments", {{"text", "hi"}}}});
  json r = sent_.AwaitId(1)["result"];
  EXPECT_EQ(r["isError"], false);
  EXPECT_EQ(r["structuredContent"], (json{{"text", "hi"}}));
  ASSERT_EQ(r["content"].size(), 1u);
  EXPECT_EQ(r["content"][0]["type"], "text");
  EXPECT_EQ(json::parse(r["content"][0]["text"].get<std::string>()), r["structuredContent"]);
}

TEST_F(ServerTest, BadArgumentsAndToolFailuresAreIsErrorResults) {
  Request(1, "tools/call", {{"name", "echo"}, {"arguments", {{"text", 3}}}});
  Request(2, "tools/call", {{"name", "fail"}});
  json bad = sent_.AwaitId(1)["result"];
  EXPECT_EQ(bad["isError"], true);
  EXPECT_THAT(bad["content"][0]["text"].get<std::string>(),
              HasSubstr("invalid_argument: argument \"text\" must be of type string"));
  json failed = sent_.AwaitId(2)["result"];
  EXPECT_EQ(failed["isError"], true);
  EXPECT_THAT(failed["content"][0]["text"].get<std::string>(), HasSubstr("sandbox_list"));
}

TEST_F(ServerTest, UnknownToolsAndMalformedCallsAreInvalidParams) {
  Request(1, "tools/call", {{"name", "nope"}});
  Request(2, "tools/call", {{"arguments", json::object()}});
  Request(3, "tools/call", {{"name", "echo"}, {"arguments", {1, 2}}});
  for (int id : {1, 2, 3}) {
    EXPECT_EQ(AnsweredAtOnce(id)["error"]["code"], kInvalidParams) << id;
  }
}

TEST_F(ServerTest, PingIsAnsweredWhileACallIsBlocked) {
  Request(1, "tools/call", {{"name", "block"}});
  WaitUntilBlocked();
  Request(2, "ping");
  EXPECT_EQ(AnsweredAtOnce(2)["result"], json::object());
  gate_.Open();
  EXPECT_EQ(sent_.AwaitId(1)["result"]["structuredContent"]["done"], true);
}

TEST_F(ServerTest, RefusesCallsBeyondTheCapWhileTheOthersRun) {
  for (int id = 1; id <= static_cast<int>(kMaxCallsInFlight); ++id) {
    Request(id, "tools/call", {{"name", "block"}});
  }
  Request(100, "tools/call", {{"name", "block"}});
  EXPECT_EQ(AnsweredAtOnce(100)["error"]["code"], kInternalError);
  gate_.Open();
  for (int id = 1; id <= static_cast<int>(kMaxCallsInFlight); ++id) {
    EXPECT_EQ(sent_.AwaitId(id)["result"]["structuredContent"]["done"], true) << id;
  }
}

TEST_F(ServerTest, CancelStopsTheCallWhichThenGetsNoAnswer) {
  Request(1, "tools/call", {{"name", "block"}});
  WaitUntilBlocked();
  Line(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})");
  server_->Shutdown();  // joins the worker: it has returned
  EXPECT_TRUE(hook_ran_);
  for (const json& m : sent_.All()) {
    EXPECT_FALSE(m.contains("id") && m["id"] == 1) << m.dump();
  }
}

TEST_F(ServerTest, ProgressIsSentOnlyWithATokenAndAlwaysIncreases) {
  Request(1, "tools/call", {{"name", "block"}, {"_meta", {{"progressToken", "tok"}}}});
  WaitUntilBlocked();
  gate_.Open();
  sent_.AwaitId(1);
  std::vector<double> progress;
  for (const json& m : sent_.All()) {
    if (m.value("method", "") == "notifications/progress") {
      EXPECT_EQ(m["params"]["progressToken"], "tok");
      progress.push_back(m["params"]["progress"].get<double>());
    }
  }
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_GT(progress[1], progress[0]);

  Request(2, "tools/call", {{"name", "echo"}, {"arguments", {{"text", "x"}}}});
  sent_.AwaitId(2);
  size_t notifications = 0;
  for (const json& m : sent_.All()) {
    notifications += m.value("method", "") == "notifications/progress" ? 1 : 0;
  }
  EXPECT_EQ(notifications, 2u);
}

TEST_F(ServerTest, SetLevelFiltersLogMessages) {
  Request(1, "logging/setLevel", {{"level", "warning"}});
  Request(2, "logging/setLevel", {{"level", "loud"}});
  EXPECT_EQ(AnsweredAtOnce(1)["result"], json::object());
  EXPECT_EQ(AnsweredAtOnce(2)["error"]["code"], kInvalidParams);
  server_->Log("info", "quiet");
  server_->Log("error", "loud");
  std::vector<std::string> logged;
  for (const json& m : sent_.All()) {
    if (m.value("method", "") == "notifications/message") {
      logged.push_back(m["params"]["data"]);
    }
  }
  EXPECT_EQ(logged, std::vector<std::string>{"loud"});
}

}  // namespace
}  // namespace abox::mcp
