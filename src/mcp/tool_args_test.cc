#include "src/mcp/tool_args.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::mcp {
namespace {

using ::testing::HasSubstr;

nlohmann::json Schema() {
  return ObjectSchema(
      {{"sandbox", SandboxProp()},
       {"cpus", IntProp("n", 1, 8)},
       {"argv", StringListProp("argv")},
       {"mode", {{"type", "string"}, {"enum", {"none", "open"}}}},
       {"env", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
       {"workspace", {{"type", {"string", "boolean", "null"}}}}},
      {"sandbox"});
}

TEST(CheckArgumentsTest, AcceptsWhatTheSchemaAllows) {
  EXPECT_TRUE(CheckArguments(Schema(), {{"sandbox", "web"}}).ok());
  EXPECT_TRUE(CheckArguments(Schema(), {{"sandbox", "web"},
                                        {"cpus", 2.0},
                                        {"argv", {"ls", "-l"}},
                                        {"mode", "open"},
                                        {"env", {{"A", "1"}}},
                                        {"workspace", false}})
                  .ok());
  EXPECT_TRUE(CheckArguments(Schema(), {{"sandbox", "web"}, {"workspace", nullptr}}).ok());
}

TEST(CheckArgumentsTest, NamesTheArgumentThatIsOff) {
  auto message = [](const nlohmann::json& args) {
    absl::Status s = CheckArguments(Schema(), args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << args.dump();
    return std::string(s.message());
  };
  EXPECT_THAT(message(nlohmann::json::object()), HasSubstr("\"sandbox\" is required"));
  EXPECT_THAT(message({{"sandbox", 3}}), HasSubstr("\"sandbox\" must be of type string"));
  EXPECT_THAT(message({{"sandbox", "w"}, {"cpus", 9}}), HasSubstr("\"cpus\" must be at most 8"));
  EXPECT_THAT(message({{"sandbox", "w"}, {"cpus", 1.5}}), HasSubstr("\"cpus\" must be of type"));
  EXPECT_THAT(message({{"sandbox", "w"}, {"argv", {"ls", 3}}}), HasSubstr("\"argv[1]\""));
  EXPECT_THAT(message({{"sandbox", "w"}, {"mode", "wide"}}), HasSubstr("must be one of"));
  EXPECT_THAT(message({{"sandbox", "w"}, {"env", {{"A", 1}}}}), HasSubstr("\"env.A\""));
  EXPECT_THAT(message({{"sandbox", "w"}, {"colour", "red"}}),
              HasSubstr("\"colour\" is not an argument of this tool"));
  EXPECT_THAT(message({{"sandbox", "w"}, {"workspace", 3}}),
              HasSubstr("string or boolean or null"));
}

TEST(ArgReadersTest, FallBackWhenAbsentOrNull) {
  nlohmann::json args = {{"s", "x"}, {"n", 4}, {"b", true}, {"null", nullptr}, {"l", {"a", "b"}}};
  EXPECT_EQ(StringArg(args, "s"), "x");
  EXPECT_EQ(StringArg(args, "null", "d"), "d");
  EXPECT_EQ(IntArg(args, "n", 1), 4);
  EXPECT_EQ(IntArg(args, "missing", 1), 1);
  EXPECT_TRUE(BoolArg(args, "b", false));
  EXPECT_EQ(StringListArg(args, "l"), (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(HasArg(args, "null"));
  EXPECT_TRUE(HasArg(args, "s"));
}

}  // namespace
}  // namespace abox::mcp
