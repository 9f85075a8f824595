#include "src/mcp/json_rpc.h"

#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"

namespace abox::mcp {
namespace {

TEST(ParseLineTest, ReadsRequestsNotificationsAndResponses) {
  ParsedLine r = ParseLine(R"({"jsonrpc":"2.0","id":7,"method":"ping"})");
  ASSERT_TRUE(r.message.has_value());
  EXPECT_EQ(r.message->kind, Incoming::Kind::kRequest);
  EXPECT_EQ(r.message->id, 7);
  EXPECT_EQ(r.message->method, "ping");
  EXPECT_TRUE(r.message->params.is_null());

  ParsedLine n = ParseLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  ASSERT_TRUE(n.message.has_value());
  EXPECT_EQ(n.message->kind, Incoming::Kind::kNotification);

  ParsedLine a = ParseLine(R"({"jsonrpc":"2.0","id":"x","result":{}})");
  ASSERT_TRUE(a.message.has_value());
  EXPECT_EQ(a.message->kind, Incoming::Kind::kResponse);
}

TEST(ParseLineTest, NotJsonIsAParseError) {
  ParsedLine r = ParseLine("{\"jsonrpc\": \"2.0\", \"id\": 1, ");
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->code, kParseError);
  EXPECT_TRUE(r.error->id.is_null());
}

TEST(ParseLineTest, MalformedMessagesAreInvalidRequestsWithTheirId) {
  struct Case {
    const char* line;
    int code;
    nlohmann::json id;
  };
  for (const Case& c : {
           Case{R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", kInvalidRequest, nullptr},
           Case{R"("ping")", kInvalidRequest, nullptr},
           Case{R"({"jsonrpc":"1.0","id":3,"method":"ping"})", kInvalidRequest, 3},
           Case{R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})", kInvalidRequest, nullptr},
           Case{R"({"jsonrpc":"2.0","id":4,"method":5})", kInvalidRequest, 4},
           Case{R"({"jsonrpc":"2.0","id":5})", kInvalidRequest, 5},
           Case{R"({"jsonrpc":"2.0","id":6,"method":"ping","params":[1]})", kInvalidParams, 6},
       }) {
    ParsedLine r = ParseLine(c.line);
    ASSERT_TRUE(r.error.has_value()) << c.line;
    EXPECT_EQ(r.error->code, c.code) << c.line;
    EXPECT_EQ(r.error->id, c.id) << c.line;
  }
}

TEST(SerializeLineTest, OneLineWithInvalidUtf8Replaced) {
  nlohmann::json m = ResultMessage(1, {{"text", std::string("a\nb\xff")}});
  std::string line = SerializeLine(m);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_THAT(line, testing::HasSubstr("a\\nb\xEF\xBF\xBD"));
}

class LineReaderTest : public testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::pipe(fds_), 0); }
  void TearDown() override {
    ::close(fds_[0]);
    if (fds_[1] >= 0) {
      ::close(fds_[1]);
    }
  }
  void Write(const std::string& s) { ASSERT_TRUE(base::WriteAll(fds_[1], s).ok()); }
  void CloseWriter() {
    ::close(fds_[1]);
    fds_[1] = -1;
  }
  int fds_[2] = {-1, -1};
};

TEST_F(LineReaderTest, SplitsLinesStripsCrAndEndsAtEof) {
  Write("one\r\ntwo\nlast");
  CloseWriter();
  LineReader reader(fds_[0], 100);
  std::optional<LineReader::Line> a = reader.Next();
  std::optional<LineReader::Line> b = reader.Next();
  std::optional<LineReader::Line> c = reader.Next();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->text, "one");
  EXPECT_EQ(b->text, "two");
  EXPECT_EQ(c->text, "last");
  EXPECT_FALSE(reader.Next().has_value());
}

TEST_F(LineReaderTest, AnOverLongLineIsReportedOnceAndTheNextLineStillReads) {
  Write(std::string(1000, 'x') + "\nok\n" + std::string(500, 'y'));
  CloseWriter();
  LineReader reader(fds_[0], 100);
  std::optional<LineReader::Line> a = reader.Next();
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->too_long);
  EXPECT_TRUE(a->text.empty());
  std::optional<LineReader::Line> b = reader.Next();
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(b->too_long);
  EXPECT_EQ(b->text, "ok");
  std::optional<LineReader::Line> c = reader.Next();
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->too_long);
  EXPECT_FALSE(reader.Next().has_value());
}

}  // namespace
}  // namespace abox::mcp
