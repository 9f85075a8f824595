// The command source: a secret whose value a command prints (a password manager's CLI such as
// `pass show github/token` or `op read op://vault/item/field`), run each time the value is needed.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/secrets/secret.h"

namespace abox::secrets {

struct CommandSourceOptions {
  std::chrono::milliseconds timeout{10'000};
  // Largest stdout accepted; more is an error (a value is a token, not a file).
  size_t max_output = 64 << 10;
};

// Runs `argv` (no shell; $PATH is searched for argv[0]) with stdin from /dev/null, the caller's
// environment, and stdout and stderr captured. The value is stdout with one trailing newline
// ("\n" or "\r\n") removed. Errors: the command is missing (NotFound), exits non-zero or dies
// (FailedPrecondition, quoting the exit code and the first line of stderr, never stdout), prints
// nothing or too much (InvalidArgument / ResourceExhausted), or outlives the timeout
// (DeadlineExceeded; the command and anything it started in its session are killed).
[[nodiscard]] absl::StatusOr<SecretValue> RunSecretCommand(
    const std::vector<std::string>& argv, const CommandSourceOptions& options = {});

}  // namespace abox::secrets
