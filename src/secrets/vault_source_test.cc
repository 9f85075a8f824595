#include "src/secrets/vault_source.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/unique_fd.h"

namespace abox::secrets {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kToken = "hvs.TEST-TOKEN-abcdef";
constexpr const char* kValue = "ghp_VALUE-from-vault-42";

// A fake Vault on 127.0.0.1 (plain HTTP): answers every request with the configured reply and
// records the request head. One connection at a time, on its own thread.
class FakeVault {
 public:
  struct Reply {
    int status = 200;
    std::string body;
    bool hang = false;         // never answer (until the client gives up)
    bool until_close = false;  // no Content-Length: the body ends when the connection does
  };

  FakeVault() {
    listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(::listen(listener_.get(), 8), 0);
    EXPECT_EQ(::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeVault() {
    stop_ = true;
    ::shutdown(listener_.get(), SHUT_RDWR);  // wakes accept()
    thread_.join();
  }

  [[nodiscard]] std::string addr() const { return absl::StrCat("http://127.0.0.1:", port_); }
  void set_reply(Reply reply) {
    std::lock_guard lock(mu_);
    reply_ = std::move(reply);
  }
  [[nodiscard]] std::string last_request() {
    std::lock_guard lock(mu_);
    return last_request_;
  }

 private:
  void Serve() {
    while (!stop_) {
      base::UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn.valid()) {
        if (errno == EINTR || errno == ECONNABORTED) {
          continue;
        }
        return;
      }
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(conn.get(), buf, sizeof(buf), 0);
        if (n <= 0) {
          break;
        }
        request.append(buf, n);
      }
      Reply reply;
      {
        std::lock_guard lock(mu_);
        last_request_ = request;
        reply = reply_;
      }
      if (reply.hang) {
        // Wait until the client closes or the test ends.
        while (!stop_) {
          pollfd p{conn.get(), POLLIN, 0};
          if (::poll(&p, 1, 20) > 0 && ::recv(conn.get(), buf, sizeof(buf), 0) <= 0) {
            break;
          }
        }
        continue;
      }
      std::string response = absl::StrCat(
          "HTTP/1.1 ", reply.status, " X\r\nContent-Type: application/json\r\n",
          reply.until_close ? "" : absl::StrCat("Content-Length: ", reply.body.size(), "\r\n"),
          "Connection: close\r\n\r\n", reply.body);
      size_t sent = 0;
      while (sent < response.size()) {
        ssize_t n =
            ::send(conn.get(), response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) {
          break;
        }
        sent += n;
      }
    }
  }

  base::UniqueFd listener_;
  int port_ = 0;
  std::atomic<bool> stop_ = false;
  std::mutex mu_;
  Reply reply_;
  std::string last_request_;
  std::thread thread_;
};

std::string KvAnswer() {
  return absl::StrCat(R"({"request_id":"x","data":{"data":{"token":")", kValue,
                      R"(","other":"other-value"},"metadata":{"version":3}}})");
}

VaultReference Ref(std::string key = "token") {
  return {.mount = "secret", .path = "ci/github", .key = std::move(key)};
}

VaultOptions Options(const FakeVault& vault) {
  VaultOptions options;
  options.addr = vault.addr();
  options.token = SecretValue(std::string(kToken));
  options.timeout = std::chrono::milliseconds(2000);
  options.getenv = [](const char*) -> const char* { return nullptr; };
  return options;
}

TEST(VaultSourceTest, ReadsTheKeyOfAKvV2Secret) {
  FakeVault vault;
  vault.set_reply({.body = KvAnswer()});
  auto value = ReadVaultSecret(Ref(), Options(vault));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->Reveal(), kValue);
  std::string request = vault.last_request();
  EXPECT_THAT(request, HasSubstr("GET /v1/secret/data/ci/github HTTP/1.1\r\n"));
  EXPECT_THAT(request, HasSubstr(absl::StrCat("X-Vault-Token: ", kToken, "\r\n")));
  EXPECT_THAT(request, Not(HasSubstr("X-Vault-Namespace")));
}

TEST(VaultSourceTest, AddressTokenAndNamespaceFromTheEnvironment) {
  FakeVault vault;
  vault.set_reply({.body = KvAnswer()});
  std::map<std::string, std::string> env = {{"VAULT_ADDR", vault.addr() + "/"},
                                            {"VAULT_TOKEN", "env-token"},
                                            {"VAULT_NAMESPACE", "team-a"}};
  VaultOptions options;
  options.getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto value = ReadVaultSecret(Ref(), options);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(vault.last_request(), HasSubstr("X-Vault-Token: env-token\r\n"));
  EXPECT_THAT(vault.last_request(), HasSubstr("X-Vault-Namespace: team-a\r\n"));
  EXPECT_THAT(vault.last_request(), HasSubstr("GET /v1/secret/data/ci/github "));
}

TEST(VaultSourceTest, NoAddressOrNoTokenSaysWhatToSet) {
  VaultOptions options;
  options.getenv = [](const char*) -> const char* { return nullptr; };
  auto value = ReadVaultSecret(Ref(), options);
  EXPECT_EQ(value.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(value.status().message(), HasSubstr("VAULT_ADDR"));
  options.addr = "http://127.0.0.1:1";
  value = ReadVaultSecret(Ref(), options);
  EXPECT_EQ(value.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(value.status().message(), HasSubstr("vault login"));
  VaultReference escaping = Ref();
  escaping.path = "ci/github?list=true";
  EXPECT_EQ(ReadVaultSecret(escaping, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.addr = "vault.example.com:8200";
  EXPECT_EQ(ReadVaultSecret(Ref(), options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(VaultSourceTest, WrongTokenIsPermissionDenied) {
  FakeVault vault;
  vault.set_reply({.status = 403, .body = R"({"errors":["permission denied"]})"});
  auto value = ReadVaultSecret(Ref(), Options(vault));
  EXPECT_EQ(value.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(value.status().message(), HasSubstr("VAULT_TOKEN"));
  EXPECT_THAT(value.status().message(), HasSubstr("secret/data/ci/github"));
}

TEST(VaultSourceTest, MissingSecretOrKeyIsNotFound) {
  FakeVault vault;
  vault.set_reply({.status = 404, .body = R"({"errors":[]})"});
  auto value = ReadVaultSecret(Ref(), Options(vault));
  EXPECT_EQ(value.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(value.status().message(), HasSubstr("vault kv get -mount=secret ci/github"));

  vault.set_reply({.body = KvAnswer()});
  value = ReadVaultSecret(Ref("password"), Options(vault));
  EXPECT_EQ(value.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(value.status().message(), HasSubstr("no key \"password\" (its keys: other, token)"));
}

TEST(VaultSourceTest, BadAnswersAreDataLoss) {
  FakeVault vault;
  for (const char* body : {"<html>proxy login</html>", R"({"data":{"token":"kv-v1"}})", "[]"}) {
    vault.set_reply({.body = body});
    auto value = ReadVaultSecret(Ref(), Options(vault));
    EXPECT_EQ(value.status().code(), absl::StatusCode::kDataLoss) << body;
  }
  vault.set_reply({.body = R"({"data":{"data":{"token":42}}})"});
  EXPECT_EQ(ReadVaultSecret(Ref(), Options(vault)).status().code(),
            absl::StatusCode::kInvalidArgument);
  vault.set_reply({.status = 503, .body = R"({"errors":["Vault is sealed"]})"});
  auto sealed = ReadVaultSecret(Ref(), Options(vault));
  EXPECT_EQ(sealed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(sealed.status().message(), HasSubstr("HTTP 503"));
  EXPECT_THAT(sealed.status().message(), HasSubstr("Vault is sealed"));
}

TEST(VaultSourceTest, HugeAnswerIsRefused) {
  FakeVault vault;
  for (bool until_close : {false, true}) {
    vault.set_reply({.body = absl::StrCat(R"({"data":{"data":{"token":")",
                                          std::string(2 << 20, 'x'), R"("}}})"),
                     .until_close = until_close});
    auto value = ReadVaultSecret(Ref(), Options(vault));
    EXPECT_EQ(value.status().code(), absl::StatusCode::kResourceExhausted) << until_close;
    EXPECT_THAT(value.status().message(), HasSubstr("size limit"));
  }
}

TEST(VaultSourceTest, SlowServerTimesOut) {
  FakeVault vault;
  vault.set_reply({.hang = true});
  VaultOptions options = Options(vault);
  options.timeout = std::chrono::milliseconds(300);
  auto value = ReadVaultSecret(Ref(), options);
  EXPECT_EQ(value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(value.status().message(), HasSubstr("did not answer within 300 ms"));
}

TEST(VaultSourceTest, UnreachableVaultIsUnavailable) {
  base::UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(probe.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  VaultOptions options;
  options.addr = absl::StrCat("http://127.0.0.1:", ntohs(addr.sin_port));  // bound, not listening
  options.token = SecretValue(std::string(kToken));
  auto value = ReadVaultSecret(Ref(), options);
  EXPECT_EQ(value.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(value.status().message(), HasSubstr("cannot connect to Vault"));
}

TEST(VaultSourceTest, ErrorsNeverContainTheTokenOrAValue) {
  FakeVault vault;
  std::vector<FakeVault::Reply> replies = {
      {.status = 403, .body = absl::StrCat(R"({"errors":["denied"],"v":")", kValue, "\"}")},
      {.status = 404, .body = kValue},
      {.body = KvAnswer()},  // read with a missing key
      {.body = absl::StrCat("not json ", kValue)},
      {.body = absl::StrCat(R"({"data":{"data":{"token":")", kValue, std::string(2 << 20, 'x'),
                            "\"}}}")},
  };
  for (const auto& reply : replies) {
    vault.set_reply(reply);
    auto value = ReadVaultSecret(Ref("missing"), Options(vault));
    ASSERT_FALSE(value.ok());
    EXPECT_THAT(value.status().message(), Not(HasSubstr(kValue)));
    EXPECT_THAT(value.status().message(), Not(HasSubstr("other-value")));
    EXPECT_THAT(value.status().message(), Not(HasSubstr(kToken)));
  }
}

}  // namespace
}  // namespace abox::secrets
