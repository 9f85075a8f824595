#include "src/api/json_body.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/errors.h"

namespace abox::api {
namespace {

using nlohmann::json;
using testing::HasSubstr;

json Parse(std::string_view body) {
  absl::StatusOr<json> parsed = ParseObject(body);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : json::object();
}

// Expects a 400 naming `field` with `text` in the message.
void ExpectFieldError(const absl::Status& s, const std::string& field, const std::string& text) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(FieldOf(s), field) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(text));
  EXPECT_EQ(ErrorKindOf(s).http_status, 400);
}

TEST(ParseObjectTest, AcceptsObjectsAndTreatsEmptyBodyAsEmptyObject) {
  EXPECT_EQ(Parse(R"({"a": 1})"), (json{{"a", 1}}));
  EXPECT_EQ(Parse(""), json::object());
  EXPECT_EQ(Parse(" \n"), json::object());
}

TEST(ParseObjectTest, RejectsMalformedJson) {
  for (std::string_view bad : {"{", "{\"a\":}", "nope", "{\"a\":1}x", "{\"a\":\"\xff\"}"}) {
    absl::StatusOr<json> r = ParseObject(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("not valid JSON"));
  }
}

TEST(ParseObjectTest, RejectsNonObjects) {
  absl::StatusOr<json> r = ParseObject("[1,2]");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("must be a JSON object, got an array"));
}

TEST(ParseObjectTest, RejectsDuplicateKeysNamingThem) {
  absl::StatusOr<json> r = ParseObject(R"({"cpus": 1, "cpus": 64})");
  ASSERT_FALSE(r.ok());
  ExpectFieldError(r.status(), "cpus", "appears more than once");
  // The same key in two different objects is fine.
  EXPECT_TRUE(ParseObject(R"({"a": {"x": 1}, "b": {"x": 2}})").ok());
}

TEST(ParseObjectTest, RejectsDeepNesting) {
  std::string deep = "{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}";
  absl::StatusOr<json> r = ParseObject(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("nests deeper"));
}

TEST(ReaderTest, ReadsEveryKindOfField) {
  json body = Parse(R"({"image": "debian", "cpus": 2, "tty": true, "argv": ["sh", "-c", "true"],
                        "labels": {"app": "web"}, "resources": {"memory_mib": 512},
                        "name": null, "hint": 1})");
  Reader r(body);
  std::string image;
  int64_t cpus = 1;
  int64_t memory = 0;
  bool tty = false;
  std::vector<std::string> argv;
  std::map<std::string, std::string> labels;
  std::optional<std::string> name;
  std::optional<int64_t> timeout;
  r.RequiredString("image", &image);
  r.OptionalInt("cpus", &cpus, 1, 64);
  r.OptionalBool("tty", &tty);
  r.RequiredStringArray("argv", &argv, 1);
  r.OptionalStringMap("labels", &labels);
  r.OptionalObject("resources",
                   [&](Reader& nested) { nested.RequiredInt("memory_mib", &memory, 64, 1 << 20); });
  r.OptionalString("name", &name);
  r.OptionalInt("timeout_s", &timeout, 0, 3600);
  r.Ignore("hint");
  ASSERT_TRUE(r.Finish().ok()) << r.Finish();
  EXPECT_EQ(image, "debian");
  EXPECT_EQ(cpus, 2);
  EXPECT_TRUE(tty);
  EXPECT_THAT(argv, testing::ElementsAre("sh", "-c", "true"));
  EXPECT_EQ(labels, (std::map<std::string, std::string>{{"app", "web"}}));
  EXPECT_EQ(memory, 512);
  EXPECT_EQ(name, std::nullopt);  // null is absent
  EXPECT_EQ(timeout, std::nullopt);
}

TEST(ReaderTest, AbsentOptionalFieldsKeepDefaults) {
  json body = Parse("{}");
  Reader r(body);
  int64_t cpus = 3;
  std::string shell = "/bin/sh";
  bool tty = true;
  r.OptionalInt("cpus", &cpus, 1, 64);
  r.OptionalString("shell", &shell);
  r.OptionalBool("tty", &tty);
  EXPECT_TRUE(r.Finish().ok());
  EXPECT_EQ(cpus, 3);
  EXPECT_EQ(shell, "/bin/sh");
  EXPECT_TRUE(tty);
}

TEST(ReaderTest, UnknownFieldIsNamedWithTheAllowedOnes) {
  json body = Parse(R"({"image": "debian", "cpu": 2})");
  Reader r(body);
  std::string image;
  int64_t cpus = 1;
  r.RequiredString("image", &image);
  r.OptionalInt("cpus", &cpus, 1, 64);
  absl::Status s = r.Finish();
  ExpectFieldError(s, "cpu", "unknown field \"cpu\"");
  EXPECT_THAT(std::string(s.message()), HasSubstr("allowed fields: cpus, image"));
}

TEST(ReaderTest, UnknownNestedFieldCarriesThePrefix) {
  json body = Parse(R"({"resources": {"memory_mib": 512, "disk": 1}})");
  Reader r(body);
  int64_t memory = 0;
  r.OptionalObject("resources",
                   [&](Reader& nested) { nested.OptionalInt("memory_mib", &memory, 64, 1 << 20); });
  ExpectFieldError(r.Finish(), "resources.disk", "unknown field \"resources.disk\"");
}

TEST(ReaderTest, MissingRequiredFieldIsNamed) {
  json body = Parse(R"({"image": null})");
  Reader r(body);
  std::string image;
  r.RequiredString("image", &image);
  ExpectFieldError(r.Finish(), "image", "is required");
}

TEST(ReaderTest, WrongTypesAreNamed) {
  struct Case {
    std::string body;
    std::string field;
    std::string text;
  };
  const Case cases[] = {
      {R"({"s": 1})", "s", "must be a string, got an integer"},
      {R"({"i": "2"})", "i", "must be an integer from 1 to 64, got a string"},
      {R"({"i": 2.0})", "i", "got a number with a fraction"},
      {R"({"b": "yes"})", "b", "must be true or false, got a string"},
      {R"({"a": "ls"})", "a", "must be an array of strings, got a string"},
      {R"({"a": ["ls", 3]})", "a[1]", "must be a string, got an integer"},
      {R"({"m": ["x"]})", "m", "must be an object of strings, got an array"},
      {R"({"m": {"k": true}})", "m.k", "must be a string, got a boolean"},
      {R"({"o": 5})", "o", "must be an object, got an integer"},
  };
  for (const Case& c : cases) {
    json body = Parse(c.body);
    Reader r(body);
    std::string s;
    int64_t i = 1;
    bool b = false;
    std::vector<std::string> a;
    std::map<std::string, std::string> m;
    r.OptionalString("s", &s);
    r.OptionalInt("i", &i, 1, 64);
    r.OptionalBool("b", &b);
    r.OptionalStringArray("a", &a);
    r.OptionalStringMap("m", &m);
    r.OptionalObject("o", [](Reader&) {});
    SCOPED_TRACE(c.body);
    ExpectFieldError(r.Finish(), c.field, c.text);
  }
}

TEST(ReaderTest, RangesAndLimitsAreEnforced) {
  json body = Parse(R"({"cpus": 65, "big": 18446744073709551615, "neg": -1, "name": "abcdef",
                        "argv": [], "nul": "a\u0000b"})");
  auto first_error = [&](const std::function<void(Reader&)>& read) {
    Reader r(body);
    read(r);
    return r.status();
  };
  int64_t i = 0;
  std::string s;
  std::vector<std::string> v;
  ExpectFieldError(first_error([&](Reader& r) { r.OptionalInt("cpus", &i, 1, 64); }), "cpus",
                   "from 1 to 64, got 65");
  ExpectFieldError(first_error([&](Reader& r) { r.OptionalInt("big", &i, 0, INT64_MAX); }), "big",
                   "got 18446744073709551615");
  ExpectFieldError(first_error([&](Reader& r) { r.OptionalInt("neg", &i, 0, 10); }), "neg",
                   "got -1");
  ExpectFieldError(first_error([&](Reader& r) { r.OptionalString("name", &s, 5); }), "name",
                   "longer than 5 bytes");
  ExpectFieldError(first_error([&](Reader& r) { r.RequiredStringArray("argv", &v, 1); }), "argv",
                   "must have 1 to 1024 items, got 0");
  ExpectFieldError(first_error([&](Reader& r) { r.OptionalString("nul", &s); }), "nul",
                   "must not contain NUL");
}

TEST(ReaderTest, FirstErrorWinsAndLaterOutputsAreUntouched) {
  json body = Parse(R"({"a": 1, "b": "x"})");
  Reader r(body);
  std::string a;
  std::string b = "default";
  r.OptionalString("a", &a);
  r.OptionalString("b", &b);
  ExpectFieldError(r.Finish(), "a", "must be a string");
  EXPECT_EQ(b, "default");
}

TEST(ReaderTest, HasDoesNotMarkTheFieldKnown) {
  json body = Parse(R"({"x": 1, "y": null})");
  Reader r(body);
  EXPECT_TRUE(r.Has("x"));
  EXPECT_FALSE(r.Has("y"));
  EXPECT_FALSE(r.Has("z"));
  ExpectFieldError(r.Finish(), "x", "unknown field");
}

}  // namespace
}  // namespace abox::api
