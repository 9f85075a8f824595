#include "src/template/project_template.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/template/template_values.h"

namespace abox::tmpl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr std::string_view kFile = ".abox.toml";

constexpr std::string_view kFullExample = R"(# .abox.toml at the repository root
image = "developer"
preset = "node"
packages = ["libpq-dev", "g++"]
setup = ["npm ci", "npm run build"]
setup_root = ["apt-get install -y ./vendor/tool.deb"]
[resources]
cpus = 2
memory = "4GiB"
disk = "32GiB"
[egress]
allow = ["api.example.com", "preset:pypi"]
setup_allow = ["preset:npm"]
)";

// The error message for `text`, which must fail to parse with kInvalidArgument.
std::string ErrorFor(std::string_view text) {
  absl::StatusOr<ProjectTemplate> t = ParseTemplate(kFile, text);
  EXPECT_FALSE(t.ok()) << text;
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
  return std::string(t.status().message());
}

TEST(ProjectTemplateTest, ParsesEveryKey) {
  absl::StatusOr<ProjectTemplate> t = ParseTemplate(kFile, kFullExample);
  ASSERT_TRUE(t.ok()) << t.status();
  ProjectTemplate want;
  want.source = ".abox.toml";
  want.image = "developer";
  want.preset = "node";
  want.packages = {"libpq-dev", "g++"};
  want.setup = {"npm ci", "npm run build"};
  want.setup_root = {"apt-get install -y ./vendor/tool.deb"};
  want.cpus = 2;
  want.memory_mib = 4096;
  want.disk_mib = 32768;
  want.egress_allow = {"api.example.com", "preset:pypi"};
  want.setup_allow = {"preset:npm"};
  EXPECT_EQ(*t, want);
}

TEST(ProjectTemplateTest, EmptyFileSetsNothing) {
  absl::StatusOr<ProjectTemplate> t = ParseTemplate(kFile, "# nothing here\n");
  ASSERT_TRUE(t.ok()) << t.status();
  ProjectTemplate want;
  want.source = ".abox.toml";
  EXPECT_EQ(*t, want);
}

TEST(ProjectTemplateTest, AcceptsDottedKeysAndInlineTables) {
  absl::StatusOr<ProjectTemplate> t =
      ParseTemplate(kFile, "resources.cpus = 3\negress = { setup_allow = [\"preset:go\"] }\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->cpus, 3);
  EXPECT_EQ(t->setup_allow, std::vector<std::string>{"preset:go"});
}

TEST(ProjectTemplateTest, ReadsSizesInEveryForm) {
  struct Case {
    std::string value;
    int64_t mib;
  };
  for (const Case& c : std::vector<Case>{{"2048", 2048},
                                         {"\"512MiB\"", 512},
                                         {"\"2GiB\"", 2048},
                                         {"\"4 GiB\"", 4096},
                                         {"262144", 262144}}) {
    absl::StatusOr<ProjectTemplate> t =
        ParseTemplate(kFile, "[resources]\nmemory = " + c.value + "\n");
    ASSERT_TRUE(t.ok()) << c.value << ": " << t.status();
    EXPECT_EQ(t->memory_mib, c.mib) << c.value;
  }
  absl::StatusOr<ProjectTemplate> t = ParseTemplate(kFile, "[resources]\ndisk = \"1TiB\"\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->disk_mib, 1048576);
}

TEST(ProjectTemplateTest, RefusesInvalidTomlWithLineAndColumn) {
  std::string message = ErrorFor("image = \"developer\"\npreset = node\n");
  EXPECT_THAT(message, StartsWith(".abox.toml is not valid TOML (line 2, column"));
  EXPECT_THAT(message, HasSubstr("fix the syntax"));
}

// Regression (template_parse_fuzz): toml++ asserted on a table header starting with a dot.
TEST(ProjectTemplateTest, RefusesATableHeaderStartingWithADot) {
  for (const char* text : {"[ .\n", "[.]\n", "[[ .a]]\n", "[=]"}) {
    EXPECT_THAT(ErrorFor(text), StartsWith(".abox.toml is not valid TOML (line 1, column")) << text;
  }
}

TEST(ProjectTemplateTest, RefusesUnknownKeysNamingTheKnownOnes) {
  std::string message = ErrorFor("image = \"developer\"\nimgae = \"x\"\n");
  EXPECT_EQ(
      message,
      ".abox.toml, line 2: unknown key 'imgae'; did you mean 'image'? The known keys are "
      "image, preset, packages, setup, [resources], [egress], setup_root; fix the spelling or "
      "remove "
      "the key");
  EXPECT_EQ(ErrorFor("[resources]\ncpu = 2\n"),
            ".abox.toml, line 2: unknown key 'cpu' in [resources]; did you mean 'cpus'? The "
            "known keys in [resources] are cpus, memory, disk; fix the spelling or remove the "
            "key");
  EXPECT_THAT(ErrorFor("[egress]\nallowed = []\n"), HasSubstr("did you mean 'allow'?"));
  EXPECT_EQ(
      ErrorFor("ports = [80]\n"),
      ".abox.toml, line 1: unknown key 'ports'; the known keys are image, preset, "
      "packages, setup, [resources], [egress], setup_root; fix the spelling or remove the key");
}

TEST(ProjectTemplateTest, RefusesEgressModeAsSomethingATemplateCannotSet) {
  std::string message = ErrorFor("[egress]\nmode = \"open\"\n");
  EXPECT_THAT(message, StartsWith(".abox.toml, line 2: egress.mode is not something a template "
                                  "can set"));
  EXPECT_THAT(message, HasSubstr("pass --egress yourself"));
}

TEST(ProjectTemplateTest, EscapesControlCharactersInKeys) {
  std::string message = ErrorFor("\"\\u001b[31mred\" = 1\n");
  EXPECT_THAT(message, HasSubstr("unknown key '\\x1B[31mred'"));
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
}

TEST(ProjectTemplateTest, RefusesWrongTypesNamingExpectedAndGot) {
  EXPECT_EQ(ErrorFor("[resources]\ncpus = \"2\"\n"),
            ".abox.toml, line 2: resources.cpus must be an integer from 1 to 64, not a string; "
            "write it like cpus = 2");
  EXPECT_EQ(ErrorFor("packages = \"libpq-dev\"\n"),
            ".abox.toml, line 1: packages must be an array of strings (Debian package names), "
            "not a string; write it like packages = [\"libpq-dev\"]");
  EXPECT_THAT(ErrorFor("setup = [\"make\", 1]\n"),
              HasSubstr("line 1: setup[1] must be a string, not an integer"));
  EXPECT_THAT(ErrorFor("image = 3\n"),
              HasSubstr("image must be a string (an image name), not an integer"));
  EXPECT_THAT(ErrorFor("preset = true\n"), HasSubstr("preset must be a string"));
  EXPECT_THAT(ErrorFor("resources = 4\n"), HasSubstr("resources must be a table, not an integer"));
  EXPECT_THAT(ErrorFor("egress = [\"x\"]\n"), HasSubstr("egress must be a table, not an array"));
  EXPECT_THAT(ErrorFor("[egress]\nallow = \"api.example.com\"\n"),
              HasSubstr("egress.allow must be an array of strings"));
  EXPECT_THAT(ErrorFor("[resources]\nmemory = 1.5\n"),
              HasSubstr("resources.memory must be an integer number of MiB or a size string, not "
                        "a floating-point number; write an integer number of MiB (2048)"));
  EXPECT_THAT(ErrorFor("[resources]\ndisk = 2024-01-01\n"), HasSubstr("not a date;"));
}

TEST(ProjectTemplateTest, RefusesNumbersOutOfRange) {
  EXPECT_EQ(ErrorFor("[resources]\ncpus = 0\n"),
            ".abox.toml, line 2: resources.cpus = 0 is out of range: it must be from 1 to 64");
  EXPECT_THAT(ErrorFor("[resources]\ncpus = 65\n"), HasSubstr("cpus = 65 is out of range"));
  EXPECT_EQ(ErrorFor("[resources]\nmemory = 64\n"),
            ".abox.toml, line 2: resources.memory = 64 is out of range: it must be from 128 MiB "
            "to 262144 MiB");
  EXPECT_THAT(ErrorFor("[resources]\nmemory = -1\n"), HasSubstr("memory = -1 is out of range"));
  EXPECT_THAT(ErrorFor("[resources]\ndisk = \"2TiB\"\n"),
              HasSubstr("resources.disk = \"2TiB\" is out of range: it must be from 1024 MiB to "
                        "1048576 MiB"));
  EXPECT_THAT(ErrorFor("[resources]\ndisk = \"512MiB\"\n"), HasSubstr("out of range"));
}

TEST(ProjectTemplateTest, RefusesMalformedSizesShowingTheAcceptedForms) {
  EXPECT_EQ(ErrorFor("[resources]\nmemory = \"4 GB\"\n"),
            ".abox.toml, line 2: resources.memory = \"4 GB\" is not a size; write an integer "
            "number of MiB (2048) or a string with a unit: \"512MiB\", \"4GiB\" or \"1TiB\" (MB "
            "and GB are not accepted: they are ambiguous)");
  for (const char* bad : {"4gib", "4G", "GiB", "-4GiB", "4.5GiB", "4  GiB", "", "9999999999GiB"}) {
    EXPECT_THAT(ErrorFor(std::string("[resources]\ndisk = \"") + bad + "\"\n"),
                HasSubstr("is not a size; write an integer number of MiB"))
        << bad;
  }
}

TEST(ProjectTemplateTest, RefusesBadPackageNames) {
  EXPECT_EQ(ErrorFor("packages = [\"libpq-dev\", \"Libpq\"]\n"),
            ".abox.toml, line 1: packages[1] = \"Libpq\" is not a Debian package name: at least "
            "2 characters of a-z, 0-9, '+', '-' and '.', starting with a letter or digit; fix "
            "the name (`apt-cache search` finds it)");
  for (const char* bad : {"a", "-rf", "foo bar", "foo:amd64", "foo;rm", "+x"}) {
    EXPECT_THAT(ErrorFor(std::string("packages = [\"") + bad + "\"]\n"),
                HasSubstr("is not a Debian package name"))
        << bad;
  }
}

TEST(ProjectTemplateTest, RefusesEmptyStrings) {
  EXPECT_EQ(ErrorFor("image = \"\"\n"),
            ".abox.toml, line 1: image is an empty string; give it a value (image = "
            "\"developer\") or remove the line");
  EXPECT_THAT(ErrorFor("setup = [\"npm ci\", \"\"]\n"), HasSubstr("setup[1] is an empty string"));
  EXPECT_THAT(ErrorFor("[egress]\nallow = [\"\"]\n"),
              HasSubstr("egress.allow[0] is an empty string"));
}

TEST(ProjectTemplateTest, RefusesNul) {
  EXPECT_THAT(ErrorFor("setup = [\"a\\u0000b\"]\n"), HasSubstr("setup[0] contains a NUL"));
}

TEST(ProjectTemplateTest, RefusesBadImageNames) {
  EXPECT_THAT(ErrorFor("image = \"Dev Image\"\n"),
              HasSubstr("image = \"Dev Image\" is not an image name: 1 to 64 characters"));
  EXPECT_THAT(ErrorFor("image = \"../etc\"\n"), HasSubstr("is not an image name"));
}

TEST(ProjectTemplateTest, RefusesUnknownPresetSuggestingTheNearest) {
  EXPECT_EQ(ErrorFor("preset = \"nodejs\"\n"),
            ".abox.toml, line 1: preset = \"nodejs\" is not a known preset; did you mean "
            "\"node\"? The presets are minimal, developer, python, node, go, rust, java, full; "
            "pick one or remove "
            "the line");
  EXPECT_THAT(ErrorFor("preset = \"cobol\"\n"),
              AllOf(Not(HasSubstr("did you mean")), HasSubstr("; the presets are minimal")));
  EXPECT_THAT(ErrorFor("preset = \"Python\"\n"), HasSubstr("did you mean \"python\"?"));
}

TEST(ProjectTemplateTest, RefusesSetupAllowThatIsNotAPreset) {
  EXPECT_EQ(ErrorFor("[egress]\nsetup_allow = [\"preset:npm\", \"registry.npmjs.org\"]\n"),
            ".abox.toml, line 2: egress.setup_allow[1] = \"registry.npmjs.org\" is not "
            "preset:NAME; setup_allow opens only package presets while setup runs (e.g. "
            "\"preset:npm\"); put other hosts in [egress] allow, which the person running abox "
            "must accept");
  EXPECT_THAT(ErrorFor("[egress]\nsetup_allow = [\"preset:\"]\n"), HasSubstr("not preset:NAME"));
  EXPECT_THAT(ErrorFor("[egress]\nsetup_allow = [\"preset:npm:80\"]\n"),
              HasSubstr("not preset:NAME"));
}

TEST(ProjectTemplateTest, RefusesOpenEgress) {
  for (const char* open : {"*", "*:443", "*.com", "*.io:80"}) {
    EXPECT_THAT(ErrorFor(std::string("[egress]\nallow = [\"") + open + "\"]\n"),
                HasSubstr("asks for open egress; a template cannot open egress to every host"))
        << open;
  }
  absl::StatusOr<ProjectTemplate> t =
      ParseTemplate(kFile, "[egress]\nallow = [\"*.example.com\", \"example.com:80,443\"]\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->egress_allow.size(), 2u);
  EXPECT_THAT(ErrorFor("[egress]\nallow = [\"a.com b.com\"]\n"),
              HasSubstr("holds a space or control character"));
}

TEST(ProjectTemplateTest, RefusesTooManyEntriesTooLongStringsAndTooLargeFiles) {
  std::string packages = "packages = [";
  for (int i = 0; i < 65; ++i) {
    packages += "\"pkg" + std::to_string(i) + "\",";
  }
  packages += "]\n";
  EXPECT_EQ(ErrorFor(packages),
            ".abox.toml, line 1: packages has 65 entries, more than the 64 allowed; combine or "
            "drop some");
  EXPECT_THAT(ErrorFor("setup = [\"" + std::string(4097, 'x') + "\"]\n"),
              HasSubstr("setup[0] is 4097 bytes long, more than the 4096 allowed"));
  std::string big = "# " + std::string(64 * 1024, 'x') + "\n";
  EXPECT_THAT(ErrorFor(big), StartsWith(".abox.toml is 65539 bytes, more than a template may be "
                                        "(65536)"));
}

TEST(ProjectTemplateTest, EveryErrorStartsWithTheFileName) {
  for (const char* bad : {"x = ", "imgae = 1", "[resources]\ncpus = 0", "packages = [\"A\"]",
                          "[egress]\nallow = [\"*\"]", "preset = \"x\"", "setup = [1]"}) {
    absl::StatusOr<ProjectTemplate> t = ParseTemplate("repo/.abox.toml", bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_THAT(std::string(t.status().message()), StartsWith("repo/.abox.toml")) << bad;
  }
}

TEST(TemplateValuesTest, ParsesSizes) {
  EXPECT_EQ(ParseSizeMib("1MiB"), 1);
  EXPECT_EQ(ParseSizeMib("3GiB"), 3072);
  EXPECT_EQ(ParseSizeMib("2TiB"), 2097152);
  EXPECT_EQ(ParseSizeMib("999999999TiB"), int64_t{999999999} * 1048576);
  EXPECT_EQ(ParseSizeMib("1000000000TiB"), std::nullopt);
  EXPECT_EQ(ParseSizeMib("4GB"), std::nullopt);
  EXPECT_EQ(ParseSizeMib("4"), std::nullopt);
}

TEST(TemplateValuesTest, SuggestsOnlyNearNames) {
  EXPECT_EQ(NearestName("setpu", {"setup", "preset"}), "setup");
  EXPECT_EQ(NearestName("xyz", {"setup", "preset"}), "");
  EXPECT_EQ(NearestName("go", {"go"}), "go");
}

}  // namespace
}  // namespace abox::tmpl
