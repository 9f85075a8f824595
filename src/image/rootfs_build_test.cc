#include "src/image/rootfs_build.h"

#include "gtest/gtest.h"
#include "src/image/fs_util.h"
#include "src/image/test_util.h"

namespace abox::image {
namespace {

RootfsInputs Base() {
  RootfsInputs in;
  in.packages = PackageSet({"jq"});
  return in;
}

TEST(RootfsCacheKeyTest, ChangesWhenAnyInputChanges) {
  const std::string base = RootfsCacheKey(Base());
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(RootfsCacheKey(Base()), base);

  RootfsInputs suite = Base();
  suite.suite = "trixie";
  RootfsInputs mirror = Base();
  mirror.mirror = "http://ftp.de.debian.org/debian";
  RootfsInputs arch = Base();
  arch.arch = "arm64";
  RootfsInputs more = Base();
  more.packages = PackageSet({"jq", "make"});
  RootfsInputs fewer = Base();
  fewer.packages = PackageSet({});
  for (const RootfsInputs* in : {&suite, &mirror, &arch, &more, &fewer}) {
    EXPECT_NE(RootfsCacheKey(*in), base);
  }
}

TEST(RootfsCacheKeyTest, CoversEachAgentsVersionAndIntegrity) {
  const ResolvedAgent claude{"claude", "@anthropic-ai/claude-code", "2.1.332", "sha512-aaa=="};
  RootfsInputs with = Base();
  with.agents = {claude};
  const std::string key = RootfsCacheKey(with);
  EXPECT_NE(key, RootfsCacheKey(Base()));
  EXPECT_EQ(RootfsCacheKey(with), key);  // same version, same key: the cache hits
  RootfsInputs newer = with;
  newer.agents[0].version = "2.1.333";
  RootfsInputs republished = with;
  republished.agents[0].integrity = "sha512-bbb==";
  RootfsInputs both = with;
  both.agents.push_back({"codex", "@openai/codex", "0.171.0", "sha512-ccc=="});
  for (const RootfsInputs* in : {&newer, &republished, &both}) {
    EXPECT_NE(RootfsCacheKey(*in), key);
  }
}

TEST(ValidateRootfsInputsTest, RefusesUnvalidatedAgents) {
  RootfsInputs in = Base();
  in.agents = {{"claude", "@anthropic-ai/claude-code", "../../x", "sha512-a"}};
  EXPECT_EQ(ValidateRootfsInputs(in).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RootfsCacheKeyTest, IgnoresPackageOrderAndDuplicates) {
  RootfsInputs a = Base();
  RootfsInputs b = Base();
  std::reverse(b.packages.begin(), b.packages.end());
  b.packages.emplace_back("jq");
  b.packages.emplace_back("bash");
  EXPECT_EQ(RootfsCacheKey(a), RootfsCacheKey(b));
}

TEST(PackageSetTest, IncludesDefaultsSortedAndUnique) {
  std::vector<std::string> p = PackageSet({"zsh", "git", "zsh"});
  EXPECT_TRUE(std::is_sorted(p.begin(), p.end()));
  EXPECT_EQ(std::adjacent_find(p.begin(), p.end()), p.end());
  for (const char* needed : {"bash", "coreutils", "git", "ca-certificates", "procps", "python3",
                             "kmod", "passwd", "zsh"}) {
    EXPECT_NE(std::find(p.begin(), p.end(), needed), p.end()) << needed;
  }
}

TEST(ValidateRootfsInputsTest, AcceptsRealisticInputs) {
  RootfsInputs in = Base();
  in.packages.emplace_back("g++");
  in.packages.emplace_back("libstdc++-12-dev");
  in.packages.emplace_back("python3.11=3.11.2-6");
  in.mirror = "https://deb.debian.org/debian/";
  EXPECT_TRUE(ValidateRootfsInputs(in).ok()) << ValidateRootfsInputs(in);
}

TEST(ValidateRootfsInputsTest, RejectsInjectionAndNonsense) {
  for (const char* pkg : {"jq,evil", "--include=x", "a b", "X", "j", "$(reboot)", "pkg=1 2", ""}) {
    RootfsInputs in = Base();
    in.packages.emplace_back(pkg);
    EXPECT_EQ(ValidateRootfsInputs(in).code(), absl::StatusCode::kInvalidArgument) << pkg;
  }
  for (const char* mirror :
       {"ftp://x/debian", "deb.debian.org", "http://x/deb ian", "http://x/'q'"}) {
    RootfsInputs in = Base();
    in.mirror = mirror;
    EXPECT_FALSE(ValidateRootfsInputs(in).ok()) << mirror;
  }
  RootfsInputs suite = Base();
  suite.suite = "--mode=root";
  EXPECT_FALSE(ValidateRootfsInputs(suite).ok());
}

TEST(MmdebstrapFailureHintTest, RecognizesNetworkAndPackageErrors) {
  const std::string net =
      "I: running apt-get update...\n"
      "Err:1 http://deb.debian.org/debian bookworm InRelease\n"
      "  Temporary failure resolving 'deb.debian.org'\n"
      "E: apt-get update failed\n";
  absl::Status hint = MmdebstrapFailureHint(net, "http://deb.debian.org/debian");
  EXPECT_EQ(hint.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(hint.message().find("cannot reach the Debian mirror http://deb.debian.org/debian"),
            std::string::npos)
      << hint;
  EXPECT_NE(hint.message().find("--mirror"), std::string::npos);

  const std::string pkg = "E: Unable to locate package nosuchpkg\nE: apt-get failed\n";
  hint = MmdebstrapFailureHint(pkg, "m");
  EXPECT_EQ(hint.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(hint.message().find("nosuchpkg"), std::string::npos) << hint;
  EXPECT_NE(hint.message().find("--packages"), std::string::npos) << hint;

  hint = MmdebstrapFailureHint("I: fine\nE: first\nabox: error: kernel missing\nI: x\n", "m");
  EXPECT_EQ(hint.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(hint.message(), "abox: error: kernel missing");
  // The hook's source echoed into the log is not mistaken for its errors.
  hint = MmdebstrapFailureHint("I: running hook: sh -c 'echo \"abox: error: x\"'\nI: ok\n", "m");
  EXPECT_EQ(hint.message(), "");
}

}  // namespace
}  // namespace abox::image

namespace abox::image {
namespace {

TEST(CleanStaleRootfsBuildsTest, RemovesDeadBuildsKeepsOnesStillLocked) {
  testing::TempDir tmp;
  base::HostLayout paths;
  paths.home = tmp.path() / "home";
  paths.cache_dir = tmp.path() / "cache";
  const auto dead = paths.cache_dir / "tmp" / "build-dead";
  const auto alive = paths.cache_dir / "tmp" / "build-alive";
  testing::WriteFileOrDie(dead / "root" / "etc" / "hostname", "abox");
  testing::WriteFileOrDie(dead / ".lock", "");
  testing::WriteFileOrDie(alive / "root" / "etc" / "hostname", "abox");
  // An orphaned mmdebstrap still holds this one's lock (here: we do).
  auto lock = FileLock::TryAcquire(alive / ".lock", "orphan");
  ASSERT_TRUE(lock.ok());
  CleanStaleRootfsBuilds(paths);
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(alive / "root" / "etc" / "hostname"));
}

}  // namespace
}  // namespace abox::image
