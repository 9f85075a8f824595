#include "src/secrets/command_source.h"

#include <openssl/crypto.h>
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::secrets {
namespace {

constexpr size_t kMaxStderr = 4096;
constexpr size_t kMaxQuotedLine = 200;

// The first line of `err`, cut short, with control characters replaced: for error messages.
std::string FirstLine(absl::string_view err) {
  absl::string_view line = err.substr(0, err.find('\n'));
  if (absl::EndsWith(line, "\r")) {
    line.remove_suffix(1);
  }
  std::string out(line.substr(0, kMaxQuotedLine));
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c >= 0 && c < 0x20; }, ' ');
  return out;
}

// How a person would refer to the command: argv[0] only (later arguments can be sensitive, such
// as an item path they would rather not see in logs).
std::string CommandName(const std::vector<std::string>& argv) {
  return absl::StrCat("secret command `", argv[0], "`");
}

int PollTimeout(absl::Time deadline) {
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) {
    return 0;
  }
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1 << 30));
}

}  // namespace

absl::StatusOr<SecretValue> RunSecretCommand(const std::vector<std::string>& argv,
                                             const CommandSourceOptions& options) {
  if (argv.empty() || argv[0].empty()) {
    return absl::InvalidArgumentError("the secret command is empty: give the program to run");
  }
  std::optional<std::string> program = base::FindExecutable(argv[0]);
  if (!program) {
    return absl::NotFoundError(absl::StrCat(CommandName(argv),
                                            " was not found (not in $PATH or not executable): "
                                            "install it or give its full path"));
  }
  ABOX_ASSIGN_OR_RETURN(base::Pipe out, base::MakePipe());
  ABOX_ASSIGN_OR_RETURN(base::Pipe err, base::MakePipe());
  base::SpawnOptions spawn;
  spawn.argv = argv;
  spawn.argv[0] = *program;
  spawn.stdout_fd = out.write.get();
  spawn.stderr_fd = err.write.get();
  spawn.close_other_fds = true;
  // Its own session: on timeout the whole group goes (a shell script's children too).
  spawn.new_session = true;
  ABOX_ASSIGN_OR_RETURN(base::ChildProcess child, base::ChildProcess::Spawn(spawn));
  out.write.reset();
  err.write.reset();
  // On a timeout or overflow the command and whatever it started in its session are killed;
  // after a clean exit nothing is (a password manager may leave an agent running on purpose).
  bool finished = false;
  absl::Cleanup kill_group = [&child, &finished] {
    if (!finished && child.pid() > 0) {
      ::kill(-child.pid(), SIGKILL);
    }
  };

  std::string value;
  // Reserved once: growing would free earlier buffers holding part of the value unwiped.
  value.reserve(options.max_output);
  std::string stderr_text;
  absl::Cleanup wipe = [&value] { Cleanse(value); };
  std::array<char, 16384> buf{};
  absl::Cleanup wipe_buf = [&buf] { OPENSSL_cleanse(buf.data(), buf.size()); };
  absl::Time deadline = absl::Now() + absl::FromChrono(options.timeout);
  pollfd fds[2] = {{out.read.get(), POLLIN, 0}, {err.read.get(), POLLIN, 0}};
  int open_count = 2;
  while (open_count > 0) {
    int ready = ::poll(fds, 2, PollTimeout(deadline));
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    if (ready < 0) {
      return base::ErrnoError("poll(secret command output)");
    }
    if (ready == 0) {
      return absl::DeadlineExceededError(absl::StrCat(
          CommandName(argv), " did not finish within ", options.timeout.count(),
          " ms and was killed: check that it does not wait for input (stdin is /dev/null)"));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) {
        continue;
      }
      ABOX_ASSIGN_OR_RETURN(size_t n, base::ReadSome(fds[i].fd, buf.data(), buf.size()));
      if (n == 0) {
        fds[i].fd = -1;
        --open_count;
      } else if (i == 0) {
        if (value.size() + n > options.max_output) {
          return absl::ResourceExhaustedError(
              absl::StrCat(CommandName(argv), " printed more than ", options.max_output,
                           " bytes on stdout: a secret command prints the value alone"));
        }
        value.append(buf.data(), n);
      } else if (stderr_text.size() < kMaxStderr) {
        stderr_text.append(buf.data(), std::min(n, kMaxStderr - stderr_text.size()));
      }
    }
  }
  absl::StatusOr<base::ExitStatus> status =
      child.Wait(std::chrono::milliseconds(std::max(PollTimeout(deadline), 1)));
  if (status.status().code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(absl::StrCat(CommandName(argv),
                                                    " closed its output but did not exit within ",
                                                    options.timeout.count(), " ms and was killed"));
  }
  ABOX_RETURN_IF_ERROR(status.status());
  finished = true;
  if (status->exit_code != 0) {
    std::string line = FirstLine(stderr_text);
    return absl::FailedPreconditionError(
        absl::StrCat(CommandName(argv), " failed (", status->ToString(), ")",
                     line.empty() ? ": it printed nothing on stderr" : absl::StrCat(": ", line)));
  }
  if (value.ends_with("\r\n")) {
    value.resize(value.size() - 2);
  } else if (value.ends_with('\n')) {
    value.pop_back();
  }
  if (value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(CommandName(argv),
                     " exited 0 but printed nothing on stdout: check that it "
                     "prints the value (and that the item exists)"));
  }
  return SecretValue(std::move(value));
}

}  // namespace abox::secrets
