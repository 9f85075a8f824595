#include "src/guest/identity_tool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/base/unique_fd.h"

namespace abox::guest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Records every call; fails the one named in `fail_at` with EPERM.
class FakeEffects final : public IdentityEffects {
 public:
  absl::Status AddEntropy(absl::string_view seed) override {
    return Record(absl::StrCat("entropy ", absl::BytesToHexString(seed)));
  }
  absl::Status SetClock(int64_t unix_time_ns) override {
    return Record(absl::StrCat("clock ", unix_time_ns));
  }
  absl::Status SetHostname(absl::string_view hostname) override {
    return Record(absl::StrCat("hostname ", hostname));
  }
  absl::Status WriteFile(const std::string& path, absl::string_view data) override {
    return Record(absl::StrCat("write ", path, " ", absl::CHexEscape(data)));
  }

  std::vector<std::string> calls;
  std::string fail_at;  // a call's first word

 private:
  absl::Status Record(std::string call) {
    std::string word = call.substr(0, call.find(' '));
    calls.push_back(std::move(call));
    if (word == fail_at) {
      return absl::ErrnoToStatus(EPERM, absl::StrCat("fake ", word));
    }
    return absl::OkStatus();
  }
};

std::string Seed() {
  std::string seed(kIdentitySeedBytes, '\x5a');
  return seed;
}

// The request EncodeIdentityRequest (src/runtime/guest_identity.h) writes for its test identity:
// the two sides' tests pin the same bytes.
std::string GoodRequest() {
  return absl::StrCat(
      R"({"seed":")", absl::Base64Escape(Seed()),
      R"(","unix_time_ns":1700000000123456789,"hostname":"abox-sb-1a2b3c",)"
      R"("machine_id":"0123456789abcdef0123456789abcdef","sandbox_id":"sb-1a2b3c"})");
}

// RunIdentityTool with `input` on stdin; the exit code, stdout and stderr.
struct ToolRun {
  int code = -1;
  std::string out;
  std::string err;
};

ToolRun RunTool(const std::string& input, FakeEffects& effects,
                std::vector<std::string> args = {}) {
  base::UniqueFd in(::memfd_create("in", MFD_CLOEXEC));
  base::UniqueFd out(::memfd_create("out", MFD_CLOEXEC));
  base::UniqueFd err(::memfd_create("err", MFD_CLOEXEC));
  EXPECT_TRUE(base::WriteAll(in.get(), input).ok());
  ::lseek(in.get(), 0, SEEK_SET);
  args.insert(args.begin(), "identity");
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  ToolRun r;
  r.code = RunIdentityTool(static_cast<int>(argv.size()), argv.data(), in.get(), out.get(),
                           err.get(), effects);
  for (auto [fd, text] : {std::pair{out.get(), &r.out}, std::pair{err.get(), &r.err}}) {
    ::lseek(fd, 0, SEEK_SET);
    *text = base::ReadAllFd(fd, 1 << 20).value_or("unreadable");
  }
  return r;
}

TEST(IdentityToolTest, AppliesEveryStepInOrderAndAnswersOk) {
  FakeEffects effects;
  ToolRun r = RunTool(GoodRequest() + "\n", effects);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ok\":true}\n");
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(effects.calls,
              ElementsAre(absl::StrCat("entropy ", absl::BytesToHexString(Seed())),
                          "clock 1700000000123456789", "hostname abox-sb-1a2b3c",
                          "write /etc/machine-id 0123456789abcdef0123456789abcdef\\n",
                          "write /run/abox/sandbox-id sb-1a2b3c\\n"));
}

TEST(IdentityToolTest, ParsesEveryField) {
  absl::StatusOr<IdentityRequest> r = ParseIdentityRequest(GoodRequest());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->seed, Seed());
  EXPECT_EQ(r->unix_time_ns, 1700000000123456789);
  EXPECT_EQ(r->hostname, "abox-sb-1a2b3c");
  EXPECT_EQ(r->machine_id, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(r->sandbox_id, "sb-1a2b3c");
}

TEST(IdentityToolTest, AFailingStepStopsTheRunAndIsNamedWithItsErrno) {
  struct Case {
    std::string fail_at;
    size_t calls;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"entropy", 1, "seeding the kernel RNG: fake entropy: Operation not permitted"},
           {"clock", 2, "setting the clock: fake clock: Operation not permitted"},
           {"hostname", 3, "setting the hostname: fake hostname: Operation not permitted"},
           {"write", 4, "writing /etc/machine-id: fake write: Operation not permitted"},
       }) {
    FakeEffects effects;
    effects.fail_at = c.fail_at;
    ToolRun r = RunTool(GoodRequest(), effects);
    EXPECT_EQ(r.code, 1) << c.fail_at;
    EXPECT_EQ(r.out, "") << c.fail_at;
    EXPECT_EQ(r.err, absl::StrCat("abox-guest identity: ", c.message, "\n"));
    EXPECT_EQ(effects.calls.size(), c.calls) << c.fail_at;
  }
}

// Each bad request is refused with a message naming the problem, and applies nothing.
TEST(IdentityToolTest, RefusesABadRequestAndAppliesNothing) {
  const std::string good = GoodRequest();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = absl::StrReplaceAll(good, {{from, to}});
    EXPECT_NE(s, good) << from;
    return s;
  };
  const std::string seed = absl::Base64Escape(Seed());
  struct Case {
    std::string name;
    std::string input;
    std::string message;
  };
  std::vector<Case> cases = {
      {"empty", "", "not one valid JSON value"},
      {"not json", "seed=1", "not one valid JSON value"},
      {"not an object", "[1,2]", "not a JSON object"},
      {"a string", "\"x\"", "not a JSON object"},
      {"trailing garbage", good + " {}", "not one valid JSON value"},
      {"two objects", good + good, "not one valid JSON value"},
      {"oversized", good + std::string(kMaxIdentityRequestBytes, ' '), "more than 4096 bytes"},
      {"unknown field", with("{", R"({"extra":1,)"), "unknown field 'extra'"},
      {"repeated field", with("{", R"({"hostname":"other",)"), "a field is given twice"},
      {"missing field", with(R"(,"sandbox_id":"sb-1a2b3c")", ""), "field 'sandbox_id' is missing"},
      {"missing seed", R"({"unix_time_ns":1})", "field 'seed' is missing"},
      {"seed not a string", with("\"" + seed + "\"", "5"), "'seed' must be a string"},
      {"bad base64", with(seed, "!!!!" + seed.substr(4)), "'seed' is not canonical base64"},
      {"base64 without padding", with(seed, seed.substr(0, seed.size() - 2)),
       "'seed' is not canonical base64"},
      {"base64 with whitespace", with(seed, seed.substr(0, 8) + "\\n" + seed.substr(8)),
       "'seed' is not canonical base64"},
      {"short seed", with(seed, absl::Base64Escape(std::string(32, 'x'))),
       "'seed' must hold 64 bytes, not 32"},
      {"long seed", with(seed, absl::Base64Escape(std::string(65, 'x'))),
       "'seed' must hold 64 bytes, not 65"},
      {"time a string", with("1700000000123456789", "\"1700000000123456789\""),
       "'unix_time_ns' must be an integer"},
      {"time a float", with("1700000000123456789", "1.7e18"), "'unix_time_ns' must be an integer"},
      {"time negative", with("1700000000123456789", "-1"), "'unix_time_ns' must be an integer"},
      {"time over int64", with("1700000000123456789", "9223372036854775808"),
       "'unix_time_ns' must be an integer"},
      {"hostname uppercase", with("abox-sb-1a2b3c", "Abox"), "'hostname' must be 1-63"},
      {"hostname leading dash", with("abox-sb-1a2b3c", "-abox"), "'hostname' must be 1-63"},
      {"hostname trailing dash", with("abox-sb-1a2b3c", "abox-"), "'hostname' must be 1-63"},
      {"hostname empty", with("\"abox-sb-1a2b3c\"", "\"\""), "'hostname' must be 1-63"},
      {"hostname too long", with("abox-sb-1a2b3c", std::string(64, 'a')),
       "'hostname' must be 1-63"},
      {"hostname with a dot", with("abox-sb-1a2b3c", "abox.local"), "'hostname' must be 1-63"},
      {"hostname with a NUL", with("abox-sb-1a2b3c", "abox\\u0000x"), "'hostname' must be 1-63"},
      {"machine id uppercase", with("0123456789abcdef0123456789abcdef", std::string(32, 'A')),
       "'machine_id' must be 32 lowercase hex digits"},
      {"machine id short", with("0123456789abcdef0123456789abcdef", "0123"),
       "'machine_id' must be 32 lowercase hex digits"},
      {"machine id zero", with("0123456789abcdef0123456789abcdef", std::string(32, '0')),
       "'machine_id' must not be all zeros"},
      {"sandbox id with a slash", with("\"sb-1a2b3c\"", "\"../x\""), "'sandbox_id' must be 1-64"},
      {"sandbox id too long", with("\"sb-1a2b3c\"", "\"" + std::string(65, 'a') + "\""),
       "'sandbox_id' must be 1-64"},
      {"sandbox id a number", with("\"sb-1a2b3c\"", "7"), "'sandbox_id' must be a string"},
  };
  for (const Case& c : cases) {
    FakeEffects effects;
    ToolRun r = RunTool(c.input, effects);
    EXPECT_EQ(r.code, 1) << c.name;
    EXPECT_EQ(r.out, "") << c.name;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.name;
    EXPECT_THAT(r.err, HasSubstr("abox-guest identity: ")) << c.name;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.name << ": " << r.err;
    EXPECT_THAT(effects.calls, IsEmpty()) << c.name;
  }
}

TEST(IdentityToolTest, ExtraArgumentsAreAUsageError) {
  FakeEffects effects;
  ToolRun r = RunTool(GoodRequest(), effects, {"--now"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unexpected argument: --now"));
  EXPECT_THAT(r.err, HasSubstr("usage: abox-guest identity"));
  EXPECT_THAT(effects.calls, IsEmpty());
}

TEST(IdentityToolTest, TheRealEffectsRefuseASeedOfTheWrongSize) {
  // The only real effect safe to call on a test host: it fails before any system call.
  SystemIdentityEffects real;
  EXPECT_EQ(real.AddEntropy("short").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace abox::guest
