#include "src/api/wire.h"

#include "gtest/gtest.h"
#include "src/api/errors.h"

namespace abox::api {
namespace {

TEST(ApiTimeTest, FormatsUtcMillisAndParsesAnyRfc3339) {
  absl::Time t = absl::FromUnixMillis(1764518731123);
  EXPECT_EQ(FormatApiTime(t), "2025-11-30T16:05:31.123Z");
  EXPECT_EQ(*ParseApiTime(FormatApiTime(t)), t);
  EXPECT_EQ(*ParseApiTime("2025-11-30T17:05:31.123+01:00"), t);
  EXPECT_FALSE(ParseApiTime("").ok());
  EXPECT_FALSE(ParseApiTime("tomorrow").ok());
}

TEST(DumpTest, CompactAndNeverThrowsOnBadUtf8) {
  EXPECT_EQ(Dump({{"a", 1}}), R"({"a":1})");
  EXPECT_EQ(Dump(nlohmann::json(std::string("\xff"))), "\"\xef\xbf\xbd\"");
}

TEST(AnswerReaderTest, ReadsKnownFieldsIgnoresOthersAndNamesTheFirstMistypedOne) {
  nlohmann::json j = {{"s", "x"},        {"i", 3},          {"n", 1.5},
                      {"b", true},       {"l", {"a", "b"}}, {"m", {{"k", "v"}}},
                      {"o", {{"i", 4}}}, {"null", nullptr}, {"other", "ignored"}};
  AnswerReader r(j);
  std::string s;
  int64_t i = 0;
  double n = 0;
  bool b = false;
  std::vector<std::string> l;
  std::map<std::string, std::string> m;
  int64_t nested = 0;
  std::string untouched = "default";
  r.String("s", &s);
  r.Int("i", &i);
  r.Number("n", &n);
  r.Bool("b", &b);
  r.StringArray("l", &l);
  r.StringMap("m", &m);
  r.Object("o", [&](AnswerReader& o) { o.Int("i", &nested); });
  r.String("null", &untouched);
  r.String("absent", &untouched);
  ASSERT_TRUE(r.status().ok()) << r.status();
  EXPECT_EQ(s, "x");
  EXPECT_EQ(i, 3);
  EXPECT_EQ(n, 1.5);
  EXPECT_TRUE(b);
  EXPECT_EQ(l, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.at("k"), "v");
  EXPECT_EQ(nested, 4);
  EXPECT_EQ(untouched, "default");

  r.Int("s", &i);
  r.Bool("i", &b);  // after the first error: a no-op
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(FieldOf(r.status()).value_or(""), "s");
  EXPECT_EQ(r.status().message(), "aboxd's answer: field \"s\" must be an integer, got a string");

  AnswerReader nested_error(j);
  nested_error.Object("o", [&](AnswerReader& o) { o.String("i", &s); });
  EXPECT_EQ(FieldOf(nested_error.status()).value_or(""), "o.i");
  EXPECT_FALSE(AnswerReader(nlohmann::json("text")).status().ok());
}

}  // namespace
}  // namespace abox::api
