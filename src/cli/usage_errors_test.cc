#include "src/cli/usage_errors.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::cli {
namespace {

using ::testing::HasSubstr;

TEST(EditDistanceTest, CountsSwapsOfNeighboursAsOneEdit) {
  EXPECT_EQ(EditDistance("memroy", "memory"), 1);
  EXPECT_EQ(EditDistance("tiemout", "timeout"), 1);
  EXPECT_EQ(EditDistance("rot", "root"), 1);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("same", "same"), 0);
}

TEST(NearestSpellingTest, FindsTheFlagATypoMeansAndNothingForStrangers) {
  std::vector<std::string> flags = {"--image", "--cpus", "--memory", "--timeout", "-e",
                                    "--env",   "--root", "-t",       "--tty",     "--no-stdin"};
  EXPECT_EQ(NearestSpelling("--memroy", flags), "--memory");
  EXPECT_EQ(NearestSpelling("--memroy=2048", flags), "--memory");
  EXPECT_EQ(NearestSpelling("--rot", flags), "--root");
  EXPECT_EQ(NearestSpelling("--tiemout", flags), "--timeout");
  EXPECT_EQ(NearestSpelling("-root", flags), "--root");
  EXPECT_EQ(NearestSpelling("--no-stdn", flags), "--no-stdin");
  EXPECT_EQ(NearestSpelling("--mem", flags), "--memory");  // a prefix of one flag
  EXPECT_EQ(NearestSpelling("--frobnicate", flags), "");
  EXPECT_EQ(NearestSpelling("-x", flags), "");  // one letter off is no evidence
  EXPECT_EQ(NearestSpelling("--", flags), "");
}

// A miniature `abox`: run and exec take their command line after their options.
struct MiniAbox {
  CLI::App app{"mini"};
  CLI::App* run = app.add_subcommand("run", "");
  CLI::App* exec = app.add_subcommand("exec", "");
  CLI::App* ls = app.add_subcommand("ls", "");
  int memory = 512;
  bool root = false;
  bool json = false;
  double timeout = 0;
  std::string id;

  MiniAbox() {
    app.require_subcommand(1);
    run->add_option("--memory", memory);
    run->add_flag("--root", root);
    run->prefix_command();
    exec->add_option("id", id)->required();
    exec->add_option("--timeout", timeout);
    exec->prefix_command();
    ls->add_flag("--json", json);
  }
  // Parses, returning the exit code (nullopt: parsed) and what went to stderr.
  std::pair<std::optional<int>, std::string> Parse(std::vector<std::string> args) {
    std::vector<char*> argv = {const_cast<char*>("abox")};
    for (std::string& a : args) {
      argv.push_back(a.data());
    }
    ::testing::internal::CaptureStderr();
    std::optional<int> code = ParseCommandLine(app, static_cast<int>(argv.size()), argv.data());
    return {code, ::testing::internal::GetCapturedStderr()};
  }
};

TEST(UsageErrorsTest, PrefixCommandsHandBackUnknownFlagsWhichAreRefused) {
  MiniAbox a;
  auto [code, err] = a.Parse({"run", "--memroy", "2048"});
  ASSERT_FALSE(code.has_value()) << err;  // CLI11 itself lets it through...
  absl::Status s = CheckCommandStart(*a.run, a.run->remaining());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);  // ...CheckCommandStart does not
  EXPECT_EQ(s.message(),
            "abox run: unknown flag --memroy; did you mean --memory? (`abox run --help` lists "
            "the flags)");
  EXPECT_EQ(a.memory, 512);

  MiniAbox b;
  ASSERT_FALSE(b.Parse({"exec", "--tiemout", "1", "web", "sh"}).first.has_value());
  EXPECT_EQ(b.id, "1");  // what CLI11 alone would run in
  EXPECT_THAT(CheckCommandStart(*b.exec, b.exec->remaining()).message(),
              HasSubstr("unknown flag --tiemout; did you mean --timeout?"));

  // The command's own flags after its first word are its own.
  MiniAbox c;
  ASSERT_FALSE(c.Parse({"run", "--root", "sh", "-c", "--memroy"}).first.has_value());
  EXPECT_TRUE(CheckCommandStart(*c.run, c.run->remaining()).ok());
  EXPECT_EQ(c.run->remaining(), (std::vector<std::string>{"sh", "-c", "--memroy"}));
  EXPECT_TRUE(c.root);
}

TEST(UsageErrorsTest, OtherCommandsRefuseUnknownFlagsAndCommandsWithTheNearest) {
  MiniAbox a;
  auto [code, err] = a.Parse({"ls", "--jsno"});
  EXPECT_EQ(code, 2);
  EXPECT_EQ(err,
            "abox: error: abox ls: unknown flag --jsno; did you mean --json? (`abox ls --help` "
            "lists the flags)\n");
  MiniAbox b;
  std::tie(code, err) = b.Parse({"exce", "web"});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err,
              HasSubstr("abox: error: unknown command 'exce'; did you mean exec? (`abox --help`"));
  // The unknown flag is named even when CLI11 fails for another reason first (no id).
  MiniAbox c;
  std::tie(code, err) = c.Parse({"exec", "--tiemout=1"});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("unknown flag --tiemout; did you mean --timeout?"));
}

TEST(UsageErrorsTest, CommandLineKeepsWhatFollowsTheSeparator) {
  EXPECT_EQ(CommandLine({}, true, {"sh", "-c", "x"}), (std::vector<std::string>{"sh", "-c", "x"}));
  EXPECT_EQ(CommandLine({"echo"}, true, {"hi"}), (std::vector<std::string>{"echo", "--", "hi"}));
  EXPECT_EQ(CommandLine({"ls", "-l"}, false, {}), (std::vector<std::string>{"ls", "-l"}));
}

}  // namespace
}  // namespace abox::cli
