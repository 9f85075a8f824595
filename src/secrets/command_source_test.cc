#include "src/secrets/command_source.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::secrets {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<SecretValue> Sh(const std::string& script, CommandSourceOptions options = {}) {
  return RunSecretCommand({"/bin/sh", "-c", script}, options);
}

TEST(CommandSourceTest, ValueIsStdoutWithOneTrailingNewlineRemoved) {
  auto value = Sh("printf 'tok-123\\n'; echo noise >&2");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->Reveal(), "tok-123");
  EXPECT_EQ(Sh("printf 'tok\\n\\n'")->Reveal(), "tok\n");
  EXPECT_EQ(Sh("printf 'tok\\r\\n'")->Reveal(), "tok");
  EXPECT_EQ(Sh("printf ' spaced tok '")->Reveal(), " spaced tok ");
}

TEST(CommandSourceTest, FailureQuotesExitCodeAndFirstStderrLineNeverStdout) {
  auto value = Sh("echo VALUE-ON-STDOUT; echo 'not logged in' >&2; echo second >&2; exit 3");
  EXPECT_EQ(value.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(value.status().message(), HasSubstr("exit code 3"));
  EXPECT_THAT(value.status().message(), HasSubstr("not logged in"));
  EXPECT_THAT(value.status().message(), Not(HasSubstr("second")));
  EXPECT_THAT(value.status().message(), Not(HasSubstr("VALUE-ON-STDOUT")));
  // The arguments (an item path, say) are not quoted either.
  EXPECT_THAT(value.status().message(), Not(HasSubstr("echo")));
}

TEST(CommandSourceTest, DeathBySignalIsAFailure) {
  auto value = Sh("printf partial; kill -9 $$");
  EXPECT_EQ(value.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(value.status().message(), HasSubstr("signal 9"));
  EXPECT_THAT(value.status().message(), Not(HasSubstr("partial")));
}

TEST(CommandSourceTest, EmptyOutputIsAnError) {
  auto value = Sh("true");
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(value.status().message(), HasSubstr("printed nothing"));
}

TEST(CommandSourceTest, TooMuchOutputIsAnError) {
  auto value = Sh("head -c 70000 /dev/zero | tr '\\0' x");
  EXPECT_EQ(value.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(value.status().message(), HasSubstr("65536"));
  EXPECT_THAT(value.status().message(), Not(HasSubstr("xxxx")));
  // Exactly the limit is fine.
  EXPECT_EQ(Sh("head -c 65536 /dev/zero | tr '\\0' x")->size(), 65536u);
}

TEST(CommandSourceTest, MissingProgramIsNotFound) {
  auto value = RunSecretCommand({"abox-no-such-password-manager", "show"});
  EXPECT_EQ(value.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(value.status().message(), HasSubstr("install it or give its full path"));
  EXPECT_EQ(RunSecretCommand({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CommandSourceTest, StdinIsClosedSoAPromptDoesNotHang) {
  auto value = Sh("read line || echo 'no tty' >&2; exit 1");
  EXPECT_THAT(value.status().message(), HasSubstr("no tty"));
}

bool GoneOrZombie(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  if (text.empty()) {
    return true;
  }
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

TEST(CommandSourceTest, TimeoutKillsTheCommandAndWhatItStarted) {
  std::string pid_file = ::testing::TempDir() + "/command_source_timeout.pid";
  std::filesystem::remove(pid_file);
  auto value = Sh("sleep 30 & echo $! > " + pid_file + "; wait",
                  {.timeout = std::chrono::milliseconds(300)});
  EXPECT_EQ(value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(value.status().message(), HasSubstr("300 ms"));

  std::ifstream in(pid_file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  int pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(text, &pid)) << text;
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = GoneOrZombie(pid);
    if (!gone) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_TRUE(gone) << "sleep " << pid << " outlived the timed-out command";
}

}  // namespace
}  // namespace abox::secrets
