#include "src/secrets/vault_source.h"

#include <openssl/crypto.h>
#include <openssl/ssl.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/asio/ssl/host_name_verification.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/string_body.hpp"
#include "boost/beast/http/write.hpp"
#include "boost/beast/ssl/ssl_stream.hpp"
#include "nlohmann/json.hpp"
#include "src/base/io.h"
#include "src/base/status_macros.h"

namespace abox::secrets {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using boost::system::error_code;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Endpoint {
  bool tls = false;
  std::string host;  // without brackets
  std::string port;
  std::string prefix;  // path before /v1, no trailing '/'
  std::string host_header;
};

absl::StatusOr<Endpoint> ParseAddr(absl::string_view addr) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("Vault address \"", addr.substr(0, 200),
                                                   "\" is not valid: ", why,
                                                   " (e.g. https://vault.example.com:8200)"));
  };
  Endpoint endpoint;
  if (absl::StartsWith(addr, "https://")) {
    endpoint.tls = true;
    addr.remove_prefix(8);
  } else if (absl::StartsWith(addr, "http://")) {
    addr.remove_prefix(7);
  } else {
    return bad("it must start with https:// or http://");
  }
  absl::string_view authority = addr.substr(0, addr.find('/'));
  absl::string_view path = addr.substr(authority.size());
  while (absl::EndsWith(path, "/")) {
    path.remove_suffix(1);
  }
  if (authority.find('@') != absl::string_view::npos ||
      path.find_first_of("?# ") != absl::string_view::npos) {
    return bad("no user, query or fragment belongs in it");
  }
  endpoint.prefix = std::string(path);
  endpoint.host_header = std::string(authority);
  absl::string_view port;
  if (absl::StartsWith(authority, "[")) {  // [v6]:port
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return bad("an IPv6 address needs its closing ']'");
    }
    endpoint.host = std::string(authority.substr(1, close - 1));
    absl::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && !absl::StartsWith(rest, ":")) {
      return bad("only :port may follow the IPv6 address");
    }
    port = rest.empty() ? "" : rest.substr(1);
  } else {
    size_t colon = authority.rfind(':');
    endpoint.host = std::string(authority.substr(0, colon));
    port = colon == absl::string_view::npos ? "" : authority.substr(colon + 1);
  }
  if (endpoint.host.empty()) {
    return bad("it has no host");
  }
  for (char c : port) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return bad("the port must be a number");
    }
  }
  endpoint.port = port.empty() ? (endpoint.tls ? "443" : "80") : std::string(port);
  return endpoint;
}

const char* GetEnv(const VaultOptions& options, const char* name) {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only
  const char* value = options.getenv ? options.getenv(name) : std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// The token: given, $VAULT_TOKEN, or ~/.vault-token (where `vault login` leaves it).
absl::StatusOr<SecretValue> ResolveToken(const VaultOptions& options) {
  if (!options.token.empty()) {
    return options.token.Clone();
  }
  if (const char* token = GetEnv(options, "VAULT_TOKEN")) {
    return SecretValue(std::string(token));
  }
  if (const char* home = GetEnv(options, "HOME")) {
    std::string path = absl::StrCat(home, "/.vault-token");
    absl::StatusOr<std::string> text = base::ReadFile(path, 4096);
    if (text.ok()) {
      std::string token(absl::StripAsciiWhitespace(*text));
      Cleanse(*text);
      if (!token.empty()) {
        return SecretValue(std::move(token));
      }
    }
  }
  return absl::FailedPreconditionError(
      "no Vault token: set VAULT_TOKEN for aboxd, or run `vault login` (which writes "
      "~/.vault-token)");
}

// Turns a finished exchange into the value, or an error that quotes no value.
absl::StatusOr<SecretValue> Interpret(unsigned status, std::string& body, const VaultReference& ref,
                                      const std::string& addr) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  Cleanse(body);
  absl::Cleanup wipe = [&doc] { CleanseJson(doc); };
  std::string where = absl::StrCat(ref.mount, "/", ref.path);
  if (status == 403) {
    return absl::PermissionDeniedError(
        absl::StrCat("Vault at ", addr, " refused the token for ", where,
                     " (403): check VAULT_TOKEN (or `vault login`) and that its policy may read ",
                     ref.mount, "/data/", ref.path));
  }
  if (status == 404) {
    return absl::NotFoundError(
        absl::StrCat("Vault at ", addr, " has no secret at ", where,
                     " (404): check the mount and the path (`vault kv get -mount=", ref.mount, " ",
                     ref.path, "`); the mount must be a KV version 2 engine"));
  }
  if (status != 200) {
    // Vault's error list says what went wrong (sealed, bad request); it never holds secrets.
    std::string errors;
    if (doc.is_object() && doc.contains("errors") && doc["errors"].is_array()) {
      for (const json& e : doc["errors"]) {
        if (e.is_string()) {
          absl::StrAppend(&errors, errors.empty() ? "" : "; ", e.get_ref<const std::string&>());
        }
      }
    }
    return absl::UnavailableError(
        absl::StrCat("Vault at ", addr, " answered HTTP ", status, " for ", where,
                     errors.empty() ? "" : absl::StrCat(": ", errors.substr(0, 300)),
                     status == 503 ? " (is it sealed? `vault status`)" : ""));
  }
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::DataLossError(absl::StrCat("Vault at ", addr, " answered ", where,
                                            " with something that is not JSON: check VAULT_ADDR "
                                            "points at Vault itself"));
  }
  json* data = nullptr;
  if (auto outer = doc.find("data"); outer != doc.end() && outer->is_object()) {
    if (auto inner = outer->find("data"); inner != outer->end() && inner->is_object()) {
      data = &*inner;
    }
  }
  if (data == nullptr) {
    return absl::DataLossError(absl::StrCat("Vault's answer for ", where,
                                            " has no data.data object: is ", ref.mount,
                                            " a KV version 2 engine? (KV v1 is not supported)"));
  }
  auto field = data->find(ref.key);
  if (field == data->end()) {
    std::vector<std::string> keys;
    for (const auto& [key, unused] : data->items()) {
      keys.push_back(key.substr(0, 64));
    }
    return absl::NotFoundError(absl::StrCat("the secret at ", where, " in Vault has no key \"",
                                            ref.key, "\" (its keys: ", absl::StrJoin(keys, ", "),
                                            ")"));
  }
  if (!field->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("key \"", ref.key, "\" of ", where,
                                                   " in Vault is not a string (",
                                                   field->type_name(), ")"));
  }
  std::string value = field->get_ref<const std::string&>();
  return SecretValue(std::move(value));
}

// Runs `io` until `done` or `deadline`; past the deadline, `cancel` is called and the aborted
// handlers drained. Returns false on the deadline.
bool RunUntil(asio::io_context& io, const bool& done, Clock::time_point deadline,
              const std::function<void()>& cancel) {
  io.restart();
  while (!done) {
    Clock::time_point now = Clock::now();
    if (now >= deadline) {
      cancel();
      while (!done && io.run_one() > 0) {
      }
      return false;
    }
    if (io.run_one_for(deadline - now) == 0 && io.stopped()) {
      return done;
    }
  }
  return true;
}

absl::Status NetworkError(const error_code& ec, absl::string_view step, const std::string& addr) {
  if (ec == bhttp::error::body_limit || ec == bhttp::error::header_limit ||
      ec == bhttp::error::buffer_overflow) {
    return absl::ResourceExhaustedError(
        absl::StrCat("Vault at ", addr, " sent an answer over the size limit: check VAULT_ADDR"));
  }
  return absl::UnavailableError(absl::StrCat("cannot ", step, " Vault at ", addr, ": ",
                                             ec.message(),
                                             "; check VAULT_ADDR and that Vault runs"));
}

// One request/response on a connected stream (plain or TLS).
template <typename Stream>
absl::StatusOr<SecretValue> Exchange(asio::io_context& io, Stream& stream,
                                     bhttp::request<bhttp::string_body>& request,
                                     Clock::time_point deadline, const VaultReference& ref,
                                     const std::string& addr, size_t max_body,
                                     const std::function<void()>& cancel,
                                     const std::string& timeout_text) {
  bool done = false;
  error_code ec;
  bhttp::async_write(stream, request, [&](error_code e, size_t) {
    ec = e;
    done = true;
  });
  if (!RunUntil(io, done, deadline, cancel)) {
    return absl::DeadlineExceededError(timeout_text);
  }
  if (ec) {
    return NetworkError(ec, "send the request to", addr);
  }
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.header_limit(64 << 10);
  parser.body_limit(max_body);
  absl::Cleanup wipe = [&] {
    Cleanse(parser.get().body());
    // All of the buffer's storage held the answer at some point: wipe all of it.
    buffer.consume(buffer.size());
    auto storage = buffer.prepare(buffer.capacity());
    OPENSSL_cleanse(storage.data(), storage.size());
  };
  // The header first: Boost 1.74's parser reports a Content-Length over body_limit from the
  // header, but an async_read of the whole message then carries on and reads the body anyway.
  for (bool header : {true, false}) {
    done = false;
    auto on_read = [&](error_code e, size_t) {
      ec = e;
      done = true;
    };
    if (header) {
      bhttp::async_read_header(stream, buffer, parser, on_read);
    } else {
      bhttp::async_read(stream, buffer, parser, on_read);
    }
    if (!RunUntil(io, done, deadline, cancel)) {
      return absl::DeadlineExceededError(timeout_text);
    }
    if (!ec && header && parser.content_length().value_or(0) > max_body) {
      ec = bhttp::error::body_limit;
    }
    if (ec) {
      return NetworkError(ec, "read the answer of", addr);
    }
  }
  return Interpret(parser.get().result_int(), parser.get().body(), ref, addr);
}

}  // namespace

absl::StatusOr<SecretValue> ReadVaultSecret(const VaultReference& ref,
                                            const VaultOptions& options) {
  ABOX_RETURN_IF_ERROR(ValidateVaultReference(ref));
  std::string addr = !options.addr.empty() ? options.addr : ref.addr;
  if (addr.empty()) {
    const char* env = GetEnv(options, "VAULT_ADDR");
    if (env == nullptr) {
      return absl::FailedPreconditionError(
          "no Vault address: set VAULT_ADDR for aboxd, or give the secret's Vault address "
          "(e.g. https://vault.example.com:8200)");
    }
    addr = env;
  }
  ABOX_ASSIGN_OR_RETURN(Endpoint endpoint, ParseAddr(addr));
  ABOX_ASSIGN_OR_RETURN(SecretValue token, ResolveToken(options));
  Clock::time_point deadline = Clock::now() + options.timeout;
  std::string timeout_text =
      absl::StrCat("Vault at ", addr, " did not answer within ", options.timeout.count(),
                   " ms: check VAULT_ADDR and the network to it");

  bhttp::request<bhttp::string_body> request{
      bhttp::verb::get, absl::StrCat(endpoint.prefix, "/v1/", ref.mount, "/data/", ref.path), 11};
  request.set(bhttp::field::host, endpoint.host_header);
  request.set(bhttp::field::user_agent, "abox");
  request.set(bhttp::field::accept, "application/json");
  request.set("X-Vault-Token", beast::string_view(token.Reveal().data(), token.Reveal().size()));
  std::string vault_namespace = options.vault_namespace;
  if (const char* env = GetEnv(options, "VAULT_NAMESPACE"); vault_namespace.empty() && env) {
    vault_namespace = env;
  }
  if (!vault_namespace.empty()) {
    request.set("X-Vault-Namespace", vault_namespace);
  }

  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  bool done = false;
  error_code ec;
  asio::ip::tcp::resolver::results_type endpoints;
  resolver.async_resolve(endpoint.host, endpoint.port,
                         [&](error_code e, asio::ip::tcp::resolver::results_type r) {
                           ec = e;
                           endpoints = std::move(r);
                           done = true;
                         });
  if (!RunUntil(io, done, deadline, [&] { resolver.cancel(); })) {
    return absl::DeadlineExceededError(timeout_text);
  }
  if (ec) {
    return NetworkError(ec, "resolve the host of", addr);
  }

  asio::ssl::context tls(asio::ssl::context::tls_client);
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_stream;
  std::optional<beast::tcp_stream> plain_stream;
  beast::tcp_stream* tcp = nullptr;
  if (endpoint.tls) {
    std::string ca_file = options.ca_file;
    if (const char* env = GetEnv(options, "VAULT_CACERT"); ca_file.empty() && env) {
      ca_file = env;
    }
    if (ca_file.empty()) {
      tls.set_default_verify_paths(ec);
    } else {
      tls.load_verify_file(ca_file, ec);
    }
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot load the CA certificates to check Vault with (",
                       ca_file.empty() ? "the system trust store" : ca_file, "): ", ec.message()));
    }
    tls.set_verify_mode(asio::ssl::verify_peer, ec);
    tls_stream.emplace(io, tls);
    tls_stream->set_verify_callback(asio::ssl::host_name_verification(endpoint.host), ec);
    if (SSL_set_tlsext_host_name(tls_stream->native_handle(), endpoint.host.c_str()) != 1) {
      return absl::InternalError("setting the TLS server name (SNI) failed");
    }
    tcp = &beast::get_lowest_layer(*tls_stream);
  } else {
    plain_stream.emplace(io);
    tcp = &*plain_stream;
  }
  auto cancel = [tcp] { tcp->close(); };

  done = false;
  tcp->async_connect(endpoints, [&](error_code e, const asio::ip::tcp::endpoint&) {
    ec = e;
    done = true;
  });
  if (!RunUntil(io, done, deadline, cancel)) {
    return absl::DeadlineExceededError(timeout_text);
  }
  if (ec) {
    return NetworkError(ec, "connect to", addr);
  }
  if (!endpoint.tls) {
    return Exchange(io, *plain_stream, request, deadline, ref, addr, options.max_body, cancel,
                    timeout_text);
  }
  done = false;
  tls_stream->async_handshake(asio::ssl::stream_base::client, [&](error_code e) {
    ec = e;
    done = true;
  });
  if (!RunUntil(io, done, deadline, cancel)) {
    return absl::DeadlineExceededError(timeout_text);
  }
  if (ec) {
    return absl::UnavailableError(absl::StrCat(
        "TLS with Vault at ", addr, " failed: ", ec.message(),
        "; if Vault's certificate comes from a private CA, set VAULT_CACERT to that CA's file"));
  }
  return Exchange(io, *tls_stream, request, deadline, ref, addr, options.max_body, cancel,
                  timeout_text);
}

}  // namespace abox::secrets
