#include "src/workspace/git_sanitize.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/child_process.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/workspace/testing/scratch_tree.h"

namespace abox::workspace {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class ScratchDir : public workspace::testing::ScratchDir {
 public:
  ScratchDir() : workspace::testing::ScratchDir("abox-gitcfg-test") {}
};

// What git itself reads from `config`: `git config -f FILE --list`, or "ERROR: ..." if git
// refuses the file.
std::string GitList(const std::string& config) {
  ScratchDir dir;
  std::string file = dir.path() + "/config";
  EXPECT_TRUE(base::WriteFileAtomic(file, config).ok());
  absl::StatusOr<base::CommandResult> r = base::RunCommand({"git", "config", "-f", file, "--list"});
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) {
    return "ERROR: spawn";
  }
  if (r->status.ShellCode() != 0) {
    return absl::StrCat("ERROR: ", r->err);
  }
  return r->out;
}

std::string Sanitize(const std::string& config, std::vector<std::string>* removed = nullptr) {
  absl::StatusOr<std::string> out = SanitizeGitConfig(config, removed);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

TEST(SanitizeGitConfigTest, KeepsOrdinaryConfigByteForByte) {
  const std::string config =
      "[core]\n"
      "\trepositoryformatversion = 0\n"
      "\tbare = false\n"
      "# a comment\n"
      "; another\n"
      "\n"
      "[branch \"main\"]\n"
      "\tremote = origin\n"
      "\tmerge = refs/heads/main\n";
  std::vector<std::string> removed;
  EXPECT_EQ(Sanitize(config, &removed), config);
  EXPECT_THAT(removed, IsEmpty());
}

TEST(SanitizeGitConfigTest, RemovesCredentialSections) {
  const std::string config =
      "[core]\n\tbare = false\n"
      "[credential]\n\thelper = store\n\tusername = alice\n"
      "[Credential \"https://example.com\"]\n\thelper = !echo password=hunter2\n"
      "[user]\n\tname = Alice\n";
  std::vector<std::string> removed;
  std::string out = Sanitize(config, &removed);
  EXPECT_THAT(out, Not(HasSubstr("hunter2")));
  EXPECT_THAT(out, Not(HasSubstr("alice")));
  EXPECT_THAT(out, Not(HasSubstr("example.com")));
  EXPECT_THAT(out, HasSubstr("# abox: removed a [credential] section"));
  EXPECT_EQ(GitList(out), "core.bare=false\nuser.name=Alice\n");
  EXPECT_THAT(removed, ElementsAre("credential.helper", "credential.username"));
}

TEST(SanitizeGitConfigTest, RemovesAuthHeadersAndClientCertsCaseInsensitively) {
  const std::string config =
      "[http]\n"
      "\tEXTRAHEADER = Authorization: Bearer abc\n"
      "\tsslVerify = true\n"
      "\tcookieFile = /home/u/cookies\n"
      "\tsslKey = /home/u/key.pem\n"
      "\tsslCert = /home/u/cert.pem\n"
      "\tsslCertPasswordProtected\n"
      "[HTTP \"https://git.corp/\"]\n"
      "\textraHeader = Authorization: Basic Zm9v\n"
      "\tpostBuffer = 1048576\n";
  std::vector<std::string> removed;
  std::string out = Sanitize(config, &removed);
  EXPECT_EQ(GitList(out), "http.sslverify=true\nhttp.https://git.corp/.postbuffer=1048576\n");
  EXPECT_THAT(removed, ElementsAre("http.extraheader", "http.cookiefile", "http.sslkey",
                                   "http.sslcert", "http.sslcertpasswordprotected"));
}

TEST(SanitizeGitConfigTest, RemovesHostProgramsAndIncludes) {
  const std::string config =
      "[core]\n"
      "\thooksPath = .githooks\n"
      "\tfsmonitor = true\n"
      "\tsshCommand = ssh -i ~/.ssh/deploy\n"
      "\taskPass = /usr/bin/ksshaskpass\n"
      "\tworktree = /home/me/src/app\n"
      "\tautocrlf = input\n"
      "[include]\n\tpath = ~/.gitconfig-secrets\n"
      "[includeIf \"gitdir:~/work/\"]\n\tpath = ~/.gitconfig-work\n"
      "[sendemail]\n\tsmtpPass = pw\n\tsmtpUser = me\n"
      "[github]\n\ttoken = ghp_x\n\tuser = me\n";
  std::vector<std::string> removed;
  std::string out = Sanitize(config, &removed);
  EXPECT_EQ(GitList(out), "core.autocrlf=input\nsendemail.smtpuser=me\ngithub.user=me\n");
  EXPECT_THAT(removed, ElementsAre("core.hookspath", "core.fsmonitor", "core.sshcommand",
                                   "core.askpass", "core.worktree", "include.path",
                                   "includeif.path", "sendemail.smtppass", "github.token"));
  EXPECT_THAT(out, HasSubstr("# abox: removed core.hookspath: hooks do not go into the guest"));
}

TEST(SanitizeGitConfigTest, StripsCredentialsFromRemoteAndRewriteUrls) {
  const std::string config =
      "[remote \"origin\"]\n"
      "\turl = https://user:tok@github.com/o/r.git\n"
      "\tpushurl = ssh://git:pw@host.example/r.git\n"
      "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
      "[remote \"scp\"]\n"
      "\turl = git@github.com:o/r.git\n"
      "[url \"https://x-access-token:ghp_abc@github.com/\"]\n"
      "\tinsteadOf = https://github.com/\n"
      "\tpushInsteadOf = https://tok@gitlab.com/\n"
      "[submodule \"lib\"]\n"
      "\turl = https://tok@example.com/lib.git\n"
      "[http]\n"
      "\tproxy = http://puser:ppass@proxy:3128\n"
      "[remote \"p\"]\n"
      "\turl = /srv/repo.git\n"
      "\tproxy = puser:ppass@proxy:3128\n";
  std::vector<std::string> removed;
  std::string out = Sanitize(config, &removed);
  EXPECT_THAT(out, Not(HasSubstr("tok")));
  EXPECT_THAT(out, Not(HasSubstr("ghp_abc")));
  EXPECT_THAT(out, Not(HasSubstr("pass")));
  EXPECT_THAT(out, Not(HasSubstr(":pw")));
  EXPECT_EQ(GitList(out),
            "remote.origin.url=https://github.com/o/r.git\n"
            "remote.origin.pushurl=ssh://git@host.example/r.git\n"
            "remote.origin.fetch=+refs/heads/*:refs/remotes/origin/*\n"
            "remote.scp.url=git@github.com:o/r.git\n"
            "url.https://github.com/.insteadof=https://github.com/\n"
            "url.https://github.com/.pushinsteadof=https://gitlab.com/\n"
            "submodule.lib.url=https://example.com/lib.git\n"
            "http.proxy=http://proxy:3128\n"
            "remote.p.url=/srv/repo.git\n"
            "remote.p.proxy=proxy:3128\n");
  EXPECT_THAT(removed,
              ElementsAre("remote.url", "remote.pushurl", "url.<base>", "url.pushinsteadof",
                          "submodule.url", "http.proxy", "remote.proxy"));
}

TEST(SanitizeGitConfigTest, StripUrlCredentialsCases) {
  EXPECT_EQ(StripUrlCredentials("https://u:p@h/x"), "https://h/x");
  EXPECT_EQ(StripUrlCredentials("https://tok@h:8443/x?y#z"), "https://h:8443/x?y#z");
  EXPECT_EQ(StripUrlCredentials("HTTP://u:p@h"), "HTTP://h");
  EXPECT_EQ(StripUrlCredentials("ftps://u:p@h/x"), "ftps://h/x");
  EXPECT_EQ(StripUrlCredentials("https://u:p@ss@h/x"), "https://h/x");
  EXPECT_EQ(StripUrlCredentials("https://h/path@x"), "https://h/path@x");
  EXPECT_EQ(StripUrlCredentials("ssh://git@h/x"), "ssh://git@h/x");
  EXPECT_EQ(StripUrlCredentials("ssh://git:pw@h/x"), "ssh://git@h/x");
  EXPECT_EQ(StripUrlCredentials("git+ssh://me:pw@h/x"), "git+ssh://me@h/x");
  EXPECT_EQ(StripUrlCredentials("git@github.com:o/r.git"), "git@github.com:o/r.git");
  EXPECT_EQ(StripUrlCredentials("u:p@proxy:3128"), "u:p@proxy:3128");
  EXPECT_EQ(StripUrlCredentials("u:p@proxy:3128", true), "proxy:3128");
  EXPECT_EQ(StripUrlCredentials("/srv/a@b/repo"), "/srv/a@b/repo");
}

TEST(SanitizeGitConfigTest, PreservesQuotingEscapesAndContinuationsOfKeptKeys) {
  const std::string config =
      "[alias]\n"
      "\tlg = \"log --graph \\\"--format=%h\\\"\" ; trailing comment\n"
      "\tlong = one \\\n"
      "two\n"
      "\ttabbed = a\\tb\\\\c # note\n"
      "[core]\n"
      "\tsshCommand = \"ssh \\\n  -i key\"\n"
      "\teditor = vim\n"
      "[section \"sub \\\"q\\\" \\\\ x\"]\n"
      "\tkey = value\n";
  std::string out = Sanitize(config);
  EXPECT_THAT(out, HasSubstr("\tlg = \"log --graph \\\"--format=%h\\\"\" ; trailing comment\n"));
  EXPECT_THAT(out, HasSubstr("\tlong = one \\\ntwo\n"));
  EXPECT_THAT(out, Not(HasSubstr("-i key")));
  EXPECT_EQ(GitList(out),
            "alias.lg=log --graph \"--format=%h\"\n"
            "alias.long=one two\n"
            "alias.tabbed=a\tb\\c\n"
            "core.editor=vim\n"
            "section.sub \"q\" \\ x.key=value\n");
}

TEST(SanitizeGitConfigTest, HandlesInlineEntriesLegacyHeadersAndCrlf) {
  const std::string config =
      "[core] hooksPath = x\r\n"
      "[remote.origin]\r\n"
      "\turl = https://u:p@h/r\r\n"
      "[credential] helper = cache\r\n"
      "[user] name = A\r\n"
      "\temail = a@b";
  std::vector<std::string> removed;
  std::string out = Sanitize(config, &removed);
  EXPECT_EQ(GitList(out), "remote.origin.url=https://h/r\nuser.name=A\nuser.email=a@b\n");
  EXPECT_THAT(removed, ElementsAre("core.hookspath", "remote.url", "credential.helper"));
}

TEST(SanitizeGitConfigTest, StripsCredentialsFromQuotedValuesWithEscapes) {
  const std::string config = "[remote \"o\"]\n\turl = \"https://u:p@h/a \\\"b\\\"\"\n";
  std::string out = Sanitize(config);
  EXPECT_EQ(GitList(out), "remote.o.url=https://h/a \"b\"\n");
}

TEST(SanitizeGitConfigTest, RejectsWhatGitRejects) {
  for (const std::string& bad :
       {std::string("[core\n"), std::string("[core \"x]\n"), std::string("[core x]\n"),
        std::string("[]\n"), std::string("[a]\nk = \"open\n"), std::string("[a]\nk = \\q\n"),
        std::string("[a]\n1k = v\n"), std::string("[a]\nk # c\n"), std::string("[a b]\n")}) {
    absl::StatusOr<std::string> out = SanitizeGitConfig(bad);
    EXPECT_FALSE(out.ok()) << "accepted: " << bad;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(GitList(bad), HasSubstr("ERROR")) << "git accepts: " << bad;
  }
}

TEST(SanitizeGitConfigTest, RejectsNulBytesThatGitWouldKeep) {
  // Stricter than git on purpose: a NUL would cut the value short in C-string consumers.
  absl::StatusOr<std::string> out = SanitizeGitConfig(std::string("[a]\nk = v\0x\n", 12));
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("NUL"));
}

TEST(SanitizeGitConfigTest, ErrorNamesLine) {
  absl::StatusOr<std::string> out = SanitizeGitConfig("[a]\n\tk = v\n\tk = \"x\n");
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("line 3"));
}

TEST(SanitizeGitConfigTest, MinimalConfigParses) {
  EXPECT_THAT(GitList(MinimalGitConfig()), HasSubstr("core.bare=false\n"));
  EXPECT_EQ(Sanitize(MinimalGitConfig()), MinimalGitConfig());
}

TEST(SanitizeGitConfigTest, SanitizesConfigGitWroteEndToEnd) {
  ScratchDir dir;
  auto git = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"git", "-C", dir.path()};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<base::CommandResult> r = base::RunCommand(argv);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status.ShellCode(), 0) << r->err;
  };
  git({"init", "-q"});
  git({"config", "credential.helper", "store --file /home/u/.git-credentials"});
  git({"config", "credential.https://example.com.username", "alice"});
  git({"remote", "add", "origin", "https://alice:s3cret@example.com/r.git"});
  git({"config", "http.https://example.com/.extraHeader", "Authorization: Bearer zzz"});
  git({"config", "core.hooksPath", "/home/u/hooks"});
  git({"config", "user.name", "Alice \"A\" Smith"});
  git({"config", "alias.st", "status -sb # short"});
  absl::StatusOr<std::string> config = base::ReadFile(dir.path() + "/.git/config");
  ASSERT_TRUE(config.ok()) << config.status();
  std::vector<std::string> removed;
  std::string out = Sanitize(*config, &removed);
  EXPECT_THAT(out, Not(HasSubstr("s3cret")));
  EXPECT_THAT(out, Not(HasSubstr("alice")));
  EXPECT_THAT(out, Not(HasSubstr("zzz")));
  std::string listed = GitList(out);
  EXPECT_THAT(listed, HasSubstr("core.bare=false\n"));
  EXPECT_THAT(listed, HasSubstr("remote.origin.url=https://example.com/r.git\n"));
  EXPECT_THAT(listed, HasSubstr("remote.origin.fetch=+refs/heads/*:refs/remotes/origin/*\n"));
  EXPECT_THAT(listed, HasSubstr("user.name=Alice \"A\" Smith\n"));
  EXPECT_THAT(listed, HasSubstr("alias.st=status -sb # short\n"));
  EXPECT_THAT(listed, Not(HasSubstr("credential")));
  EXPECT_THAT(listed, Not(HasSubstr("hookspath")));
  EXPECT_THAT(listed, Not(HasSubstr("extraheader")));
  EXPECT_THAT(removed, ElementsAre("core.hookspath", "credential.helper", "credential.username",
                                   "remote.url", "http.extraheader"));
}

}  // namespace
}  // namespace abox::workspace
