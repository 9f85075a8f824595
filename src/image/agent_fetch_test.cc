#include "src/image/agent_fetch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "src/image/test_util.h"

namespace abox::image {
namespace {

using ::abox::image::testing::ReadFileOrDie;
using ::abox::image::testing::TempDir;
using ::abox::image::testing::WriteFileOrDie;

constexpr char kClaudeIntegrity[] = "sha512-tvSh6bLvEbd97APD31AnojOrRC3AmcRj5R8sF8QIQitu3x2u==";

ResolvedAgent Claude() {
  return {"claude", "@anthropic-ai/claude-code", "2.1.332", kClaudeIntegrity};
}
ResolvedAgent Codex() { return {"codex", "@openai/codex", "0.171.0", "sha512-1IOFzL2Xg86t=="}; }

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A node_modules tree as `npm install --ignore-scripts` leaves it for `a`, with a static x86-64
// ELF as the native executable (or `native` instead when given).
void FakeInstall(const std::filesystem::path& prefix, const ResolvedAgent& a,
                 const std::string& integrity, const std::string* native = nullptr) {
  const AgentKind* kind = FindAgentKind(a.name);
  const std::filesystem::path nm = prefix / "node_modules";
  WriteFileOrDie(nm / kind->package / "package.json", "{}");
  const std::string exe = native != nullptr ? *native : testing::TestElf(PT_LOAD, "native");
  const std::filesystem::path payload = nm / kind->native_package / kind->payload;
  if (a.name == "codex") {
    WriteFileOrDie(payload / kind->entry, exe);
    WriteFileOrDie(payload / "codex-path" / "rg", testing::TestElf(PT_LOAD, "rg"));
  } else {
    WriteFileOrDie(payload, exe);
  }
  nlohmann::json lock = {{"packages",
                          {{"", nlohmann::json::object()},
                           {std::string("node_modules/") + kind->package,
                            {{"version", a.version}, {"integrity", integrity}}}}}};
  WriteFileOrDie(prefix / "package-lock.json", lock.dump());
}

class AgentFetchTest : public ::testing::Test {
 protected:
  AgentFetchTest() {
    ctx_.home = tmp_.path() / "home";
    ctx_.cache = tmp_.path() / "npm-cache";
    ctx_.log = tmp_.path() / "build.log";
    std::filesystem::create_directories(ctx_.home);
    ctx_.run = [this](const NpmCommand& c) -> absl::StatusOr<NpmOutput> {
      calls_.push_back(c);
      return reply_(c);
    };
  }

  TempDir tmp_;
  NpmContext ctx_;
  std::vector<NpmCommand> calls_;
  std::function<absl::StatusOr<NpmOutput>(const NpmCommand&)> reply_;
};

TEST(NpmArgvTest, InstallIgnoresScriptsAndPinsTheExactVersion) {
  const std::vector<std::string> argv = NpmInstallArgv("/cache/tmp/b/npm-claude", Claude());
  EXPECT_EQ(argv[0], "npm");
  EXPECT_EQ(argv[1], "install");
  for (const char* want : {"--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev",
                           "--os=linux", "--cpu=x64", "--prefix", "/cache/tmp/b/npm-claude"}) {
    EXPECT_TRUE(Has(argv, want)) << want;
  }
  EXPECT_EQ(argv.back(), "@anthropic-ai/claude-code@2.1.332");
}

TEST(NpmArgvTest, ViewAsksForVersionAndIntegrityAsJson) {
  EXPECT_EQ(NpmViewArgv({"codex", "latest"}),
            (std::vector<std::string>{"npm", "view", "--json", "@openai/codex@latest", "version",
                                      "dist.integrity"}));
}

TEST_F(AgentFetchTest, EnvironmentIsCleanWithHomeAndCacheOfOurOwn) {
  ::setenv("ABOX_TEST_SECRET_TOKEN", "x", 1);       // NOLINT(concurrency-mt-unsafe)
  ::setenv("https_proxy", "http://proxy:3128", 1);  // NOLINT(concurrency-mt-unsafe)
  const std::vector<std::string> env = NpmEnvironment(ctx_);
  ::unsetenv("ABOX_TEST_SECRET_TOKEN");  // NOLINT(concurrency-mt-unsafe)
  ::unsetenv("https_proxy");             // NOLINT(concurrency-mt-unsafe)
  EXPECT_TRUE(Has(env, "HOME=" + ctx_.home.string()));
  EXPECT_TRUE(Has(env, "npm_config_cache=" + ctx_.cache.string()));
  EXPECT_TRUE(Has(env, "https_proxy=http://proxy:3128"));
  // --prefix must not move npm's global config (an admin's cafile or proxy) away.
  if (base::FindExecutable("node")) {
    EXPECT_TRUE(std::any_of(env.begin(), env.end(), [](const std::string& e) {
      return e.rfind("npm_config_globalconfig=", 0) == 0 &&
             e.find("/etc/npmrc") != std::string::npos;
    }));
  }
  for (const std::string& e : env) {
    EXPECT_EQ(e.find("ABOX_TEST_SECRET"), std::string::npos) << e;
    if (e.rfind("npm_config_userconfig=", 0) == 0) {
      EXPECT_EQ(e.find(ctx_.home.string()), 22u) << "user npmrc must not be read: " << e;
    }
  }
}

TEST(ParseNpmViewTest, ReadsObjectAndNewestOfARange) {
  auto one = ParseNpmView({"claude", "latest"},
                          R"({"version": "2.1.332", "dist.integrity": "sha512-abc=="})", "log");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one,
            (ResolvedAgent{"claude", "@anthropic-ai/claude-code", "2.1.332", "sha512-abc=="}));
  auto range = ParseNpmView({"claude", ">=2.1.330"},
                            R"([{"version": "2.1.330", "dist.integrity": "sha512-a=="},
                                {"version": "2.1.332", "dist.integrity": "sha512-c=="}])",
                            "log");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->version, "2.1.332");
  EXPECT_EQ(range->integrity, "sha512-c==");
}

TEST(ParseNpmViewTest, MapsRegistryErrors) {
  auto missing = ParseNpmView(
      {"claude", "9.9.9"},
      R"({"error": {"code": "E404", "summary": "No match found for version 9.9.9"}})", "/l/b.log");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("@anthropic-ai/claude-code@9.9.9"), std::string::npos);
  EXPECT_NE(missing.status().message().find("/l/b.log"), std::string::npos);
  auto offline = ParseNpmView({"codex", "latest"},
                              R"({"error": {"code": "ENOTFOUND", "summary": "getaddrinfo"}})", "l");
  EXPECT_EQ(offline.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(offline.status().message().find("cannot reach the npm registry"), std::string::npos);
  EXPECT_EQ(ParseNpmView({"codex", "^9"}, "", "l").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseNpmView({"codex", "1"}, "npm WARN", "l").status().code(),
            absl::StatusCode::kInternal);
  // An answer that would make a bad path or argument.
  EXPECT_EQ(
      ParseNpmView({"codex", "1"}, R"({"version": "../x", "dist.integrity": "sha512-a"})", "l")
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(AgentFetchTest, ResolveRunsNpmViewPerAgent) {
  reply_ = [](const NpmCommand& c) -> absl::StatusOr<NpmOutput> {
    const bool codex = c.argv[3].rfind("@openai/codex@", 0) == 0;
    return NpmOutput{{0, std::nullopt},
                     codex ? R"({"version": "0.171.0", "dist.integrity": "sha512-x"})"
                           : R"({"version": "2.1.332", "dist.integrity": "sha512-y"})"};
  };
  auto r = ResolveAgents({{"claude", "latest"}, {"codex", "0.171.0"}}, ctx_);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].version, "2.1.332");
  EXPECT_EQ((*r)[1].integrity, "sha512-x");
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[1].argv[3], "@openai/codex@0.171.0");
  EXPECT_EQ(calls_[0].log, ctx_.log);
  EXPECT_EQ(calls_[0].cwd, ctx_.home);  // not the user's cwd, whose .npmrc npm would read
  EXPECT_GT(calls_[0].timeout.count(), 0);
}

TEST_F(AgentFetchTest, ResolveFailureWithoutJsonNamesTheLog) {
  reply_ = [](const NpmCommand&) -> absl::StatusOr<NpmOutput> {
    return NpmOutput{{1, std::nullopt}, ""};
  };
  auto r = ResolveAgents({{"claude", "latest"}}, ctx_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(r.status().message().find(ctx_.log.string()), std::string::npos);
  reply_ = [](const NpmCommand&) -> absl::StatusOr<NpmOutput> {
    return absl::FailedPreconditionError(
        "npm is not installed: install it with `sudo apt-get install npm`");
  };
  EXPECT_NE(
      ResolveAgents({{"claude", "latest"}}, ctx_).status().message().find("apt-get install npm"),
      std::string::npos);
}

TEST_F(AgentFetchTest, LocatesNativeBuildOrSaysWhereItLooked) {
  const std::filesystem::path prefix = tmp_.path() / "p";
  FakeInstall(prefix, Claude(), kClaudeIntegrity);
  auto claude = LocateAgentPayload(prefix / "node_modules", Claude());
  ASSERT_TRUE(claude.ok()) << claude.status();
  EXPECT_EQ(*claude, prefix / "node_modules/@anthropic-ai/claude-code-linux-x64/claude");
  FakeInstall(prefix, Codex(), "sha512-1IOFzL2Xg86t==");
  auto codex = LocateAgentPayload(prefix / "node_modules", Codex());
  ASSERT_TRUE(codex.ok()) << codex.status();
  EXPECT_EQ(codex->filename(), "x86_64-unknown-linux-musl");

  std::filesystem::remove(*claude);
  auto missing = LocateAgentPayload(prefix / "node_modules", Claude());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("@anthropic-ai/claude-code@2.1.332"),
            std::string::npos);
  EXPECT_NE(missing.status().message().find("claude-code-linux-x64/claude"), std::string::npos);
  std::filesystem::remove(*codex / "bin/codex");
  EXPECT_NE(
      LocateAgentPayload(prefix / "node_modules", Codex()).status().message().find("bin/codex"),
      std::string::npos);
}

TEST_F(AgentFetchTest, StagesTheNativeBuildUnderNameAndVersion) {
  reply_ = [](const NpmCommand& c) -> absl::StatusOr<NpmOutput> {
    const std::filesystem::path prefix = c.argv[3];
    const bool codex = c.argv.back().rfind("@openai/codex@", 0) == 0;
    FakeInstall(prefix, codex ? Codex() : Claude(), codex ? Codex().integrity : kClaudeIntegrity);
    return NpmOutput{{0, std::nullopt}, "added 2 packages"};
  };
  const std::filesystem::path out = tmp_.path() / "agents";
  absl::Status s =
      StageAgents({Claude(), Codex()}, "bookworm", {"bash"}, tmp_.path() / "npm", out, ctx_);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_TRUE(Has(calls_[0].argv, "--ignore-scripts"));
  EXPECT_EQ(::access((out / "claude/2.1.332/claude").c_str(), X_OK), 0);
  EXPECT_EQ(::access((out / "codex/0.171.0/bin/codex").c_str(), X_OK), 0);
  EXPECT_TRUE(std::filesystem::exists(out / "codex/0.171.0/codex-path/rg"));
  // Only the payload: nothing of the JS wrapper packages.
  EXPECT_FALSE(std::filesystem::exists(out / "claude/2.1.332/package.json"));
}

TEST_F(AgentFetchTest, RefusesAnInstallThatIsNotTheResolvedTarball) {
  reply_ = [](const NpmCommand& c) -> absl::StatusOr<NpmOutput> {
    FakeInstall(c.argv[3], Claude(), "sha512-somethingelse==");
    return NpmOutput{{0, std::nullopt}, ""};
  };
  absl::Status s =
      StageAgents({Claude()}, "bookworm", {}, tmp_.path() / "npm", tmp_.path() / "agents", ctx_);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("@anthropic-ai/claude-code@2.1.332"), std::string::npos);
}

TEST_F(AgentFetchTest, RefusesANativeBuildThatIsNotAnX86Executable) {
  reply_ = [](const NpmCommand& c) -> absl::StatusOr<NpmOutput> {
    const std::string script = "#!/bin/sh\necho stub\n";
    FakeInstall(c.argv[3], Claude(), kClaudeIntegrity, &script);
    return NpmOutput{{0, std::nullopt}, ""};
  };
  absl::Status s =
      StageAgents({Claude()}, "bookworm", {}, tmp_.path() / "npm", tmp_.path() / "agents", ctx_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("2.1.332"), std::string::npos);
  EXPECT_NE(s.message().find("claude-code-linux-x64/claude"), std::string::npos);
}

TEST_F(AgentFetchTest, FailedInstallSaysWhetherTheRegistryWasUnreachable) {
  reply_ = [this](const NpmCommand&) -> absl::StatusOr<NpmOutput> {
    WriteFileOrDie(ctx_.log, "npm error code ECONNREFUSED\n");
    return NpmOutput{{1, std::nullopt}, ""};
  };
  absl::Status s =
      StageAgents({Claude()}, "bookworm", {}, tmp_.path() / "npm", tmp_.path() / "agents", ctx_);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find(ctx_.log.string()), std::string::npos);
}

// The real runner, with a shell script standing in for npm on PATH.
class SystemNpmRunnerTest : public ::testing::Test {
 protected:
  SystemNpmRunnerTest() {
    const char* path = ::getenv("PATH");  // NOLINT(concurrency-mt-unsafe)
    old_path_ = path != nullptr ? path : "";
    std::filesystem::create_directories(tmp_.path() / "bin");
  }
  ~SystemNpmRunnerTest() override {
    ::setenv("PATH", old_path_.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  }
  void UseFakeNpm(const std::string& script) {
    const std::filesystem::path npm = tmp_.path() / "bin" / "npm";
    WriteFileOrDie(npm, "#!/bin/sh\n" + script);
    ::chmod(npm.c_str(), 0755);
    ::setenv("PATH", (tmp_.path() / "bin").c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  }
  NpmCommand Command(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    return {
        {"npm", "view", "--json", "x"}, {"PATH=/usr/bin:/bin"}, tmp_.path() / "npm.log", timeout};
  }

  TempDir tmp_;
  std::string old_path_;
};

TEST_F(SystemNpmRunnerTest, MissingNpmSaysHowToInstallIt) {
  ::setenv("PATH", (tmp_.path() / "bin").c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  auto r = SystemNpmRunner()(Command());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("sudo apt-get install npm"), std::string::npos);
}

TEST_F(SystemNpmRunnerTest, CapturesStdoutAndLogsStderr) {
  UseFakeNpm("echo '{\"version\": \"1.0.0\"}'\necho 'npm warn something' >&2\nexit 3\n");
  auto r = SystemNpmRunner()(Command());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status.exit_code, 3);
  EXPECT_EQ(r->out, "{\"version\": \"1.0.0\"}\n");
  const std::string log = ReadFileOrDie(tmp_.path() / "npm.log");
  EXPECT_NE(log.find("+ npm view --json x"), std::string::npos);
  EXPECT_NE(log.find("npm warn something"), std::string::npos);
}

TEST_F(SystemNpmRunnerTest, KillsNpmAtTheTimeout) {
  UseFakeNpm("exec sleep 60\n");
  auto r = SystemNpmRunner()(Command(std::chrono::seconds(1)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("npm.log"), std::string::npos);
}

}  // namespace
}  // namespace abox::image
