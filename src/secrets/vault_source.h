// The Vault source: a field of a HashiCorp Vault KV v2 secret, read each time it is needed.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "src/base/host_layout.h"
#include "src/secrets/secret.h"

namespace abox::secrets {

struct VaultOptions {
  // Vault's address (http:// or https://, optionally a path prefix). Empty: the reference's
  // addr, else $VAULT_ADDR.
  std::string addr;
  // Empty: $VAULT_TOKEN, else the file the vault CLI logs in to (~/.vault-token).
  SecretValue token;
  // PEM file of the CA Vault's certificate chains to. Empty: $VAULT_CACERT, else the system
  // trust store.
  std::string ca_file;
  // Sent as X-Vault-Namespace (Vault Enterprise). Empty: $VAULT_NAMESPACE, else none.
  std::string vault_namespace;
  // Bounds the whole exchange: name resolution, connection, TLS, request and answer.
  std::chrono::milliseconds timeout{10'000};
  // Largest answer accepted (headers and body each).
  size_t max_body = 1 << 20;
  // Environment lookup (tests inject one); unset means ::getenv.
  base::GetEnvFn getenv;
};

// GET {addr}/v1/{mount}/data/{path} with X-Vault-Token, returning data.data.{key}. https verifies
// Vault's certificate and host name. Errors say what to fix: no address or token
// (FailedPrecondition), unreachable or timed out (Unavailable / DeadlineExceeded), 403
// (PermissionDenied), 404 or no such key (NotFound), an answer over max_body
// (ResourceExhausted), an answer that is not KV v2 JSON (DataLoss). Neither the token nor any
// value from the answer appears in an error.
[[nodiscard]] absl::StatusOr<SecretValue> ReadVaultSecret(const VaultReference& reference,
                                                          const VaultOptions& options);

}  // namespace abox::secrets
