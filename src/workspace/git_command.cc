#include "src/workspace/git_command.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/base/child_process.h"
#include "src/base/io.h"
#include "src/base/status_macros.h"

extern char** environ;

namespace abox::workspace {
namespace {

// The environment git runs with: the caller's, minus what would redirect git or make it
// interactive, plus settings that keep it from running configured programs.
std::vector<std::string> GitEnvironment(const GitOptions& options) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view kv(*e);
    if (absl::StartsWith(kv, "GIT_") || absl::StartsWith(kv, "LC_ALL=") ||
        absl::StartsWith(kv, "PAGER=")) {
      continue;
    }
    env.emplace_back(kv);
  }
  env.emplace_back("LC_ALL=C");
  env.emplace_back("GIT_TERMINAL_PROMPT=0");
  env.emplace_back("GIT_OPTIONAL_LOCKS=0");
  env.emplace_back("GIT_CONFIG_NOSYSTEM=1");
  env.emplace_back("GIT_PAGER=cat");
  // Replace refs would show other objects than the ones asked for; a partial clone would
  // fetch missing objects from its remote (git 2.45 and later honour this).
  env.emplace_back("GIT_NO_REPLACE_OBJECTS=1");
  env.emplace_back("GIT_NO_LAZY_FETCH=1");
  if (options.no_global_config) {
    env.emplace_back("GIT_CONFIG_GLOBAL=/dev/null");
  }
  env.insert(env.end(), options.env.begin(), options.env.end());
  return env;
}

}  // namespace

absl::StatusOr<GitResult> RunGit(const std::string& cwd, const std::vector<std::string>& args,
                                 absl::string_view input, size_t max_output) {
  GitOptions options;
  options.input = input;
  options.max_output = max_output;
  return RunGit(cwd, args, options);
}

absl::StatusOr<GitResult> RunGit(const std::string& cwd, const std::vector<std::string>& args,
                                 const GitOptions& git_options) {
  absl::string_view input = git_options.input;
  const size_t max_output = git_options.max_output;
  ABOX_ASSIGN_OR_RETURN(base::Pipe in, base::MakePipe());
  ABOX_ASSIGN_OR_RETURN(base::Pipe out, base::MakePipe());
  ABOX_ASSIGN_OR_RETURN(base::Pipe err, base::MakePipe());
  base::SpawnOptions options;
  options.argv = {"git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.env = GitEnvironment(git_options);
  options.cwd = cwd;
  options.stdin_fd = in.read.get();
  options.stdout_fd = out.write.get();
  options.stderr_fd = err.write.get();
  absl::StatusOr<base::ChildProcess> child = base::ChildProcess::Spawn(options);
  if (!child.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot run git (", child.status().message(),
                                                      "): install it (apt install git)"));
  }
  in.read.reset();
  out.write.reset();
  err.write.reset();
  ABOX_RETURN_IF_ERROR(base::SetNonBlocking(in.write.get()));
  ABOX_RETURN_IF_ERROR(base::SetNonBlocking(out.read.get()));
  ABOX_RETURN_IF_ERROR(base::SetNonBlocking(err.read.get()));
  if (input.empty()) {
    in.write.reset();
  }

  GitResult result;
  char buf[1 << 16];
  while (out.read || err.read) {
    pollfd fds[3];
    int n = 0;
    auto add = [&](base::UniqueFd& fd, short events) {
      fds[n] = {fd ? fd.get() : -1, events, 0};
      ++n;
    };
    add(out.read, POLLIN);
    add(err.read, POLLIN);
    add(in.write, POLLOUT);
    if (::poll(fds, n, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      return base::ErrnoError("poll(git)", errno);
    }
    if (in.write && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      ssize_t w = ::write(in.write.get(), input.data(), input.size());
      if (w > 0) {
        input.remove_prefix(static_cast<size_t>(w));
      }
      if (input.empty() || (w < 0 && errno != EAGAIN && errno != EINTR)) {
        in.write.reset();  // done, or git stopped reading (EPIPE)
      }
    }
    for (int i = 0; i < 2; ++i) {
      base::UniqueFd& fd = i == 0 ? out.read : err.read;
      std::string& sink = i == 0 ? result.out : result.err;
      if (!fd || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
        continue;
      }
      ssize_t r = ::read(fd.get(), buf, sizeof(buf));
      if (r > 0 && i == 0 && git_options.on_output) {
        if (absl::Status s = git_options.on_output(absl::string_view(buf, static_cast<size_t>(r)));
            !s.ok()) {
          return s;  // the child is killed and reaped by its destructor
        }
      } else if (r > 0) {
        sink.append(buf, static_cast<size_t>(r));
        if (sink.size() > max_output) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "git ", args.empty() ? "" : args[0], " printed more than ", max_output, " bytes"));
        }
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        fd.reset();
      }
    }
  }
  in.write.reset();
  ABOX_ASSIGN_OR_RETURN(base::ExitStatus status, child->Wait());
  result.exit_code = status.ShellCode();
  return result;
}

}  // namespace abox::workspace
