#include "src/http/auth.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/unique_fd.h"

namespace abox::http {
namespace {

using testing::HasSubstr;

TEST(AuthTest, PeerCredentialsOfASocketPairAreOurs) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  base::UniqueFd a(fds[0]);
  base::UniqueFd b(fds[1]);
  absl::StatusOr<PeerCredentials> cred = GetPeerCredentials(a.get());
  ASSERT_TRUE(cred.ok()) << cred.status();
  EXPECT_EQ(cred->uid, ::geteuid());
  EXPECT_EQ(cred->pid, ::getpid());
}

TEST(AuthTest, PeerCredentialsOfANonSocketFail) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  base::UniqueFd a(fds[0]);
  base::UniqueFd b(fds[1]);
  absl::StatusOr<PeerCredentials> cred = GetPeerCredentials(a.get());
  ASSERT_FALSE(cred.ok());
  EXPECT_THAT(std::string(cred.status().message()), HasSubstr("SO_PEERCRED"));
}

TEST(AuthTest, CheckPeerUidAllowsOnlyTheServedUid) {
  EXPECT_TRUE(CheckPeerUid({.pid = 10, .uid = 1000, .gid = 1000}, 1000).ok());
  absl::Status refused = CheckPeerUid({.pid = 10, .uid = 1001, .gid = 1000}, 1000);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("uid 1001 (pid 10) refused"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("serves only uid 1000"));
  // Root is another user too: a per-user daemon does not serve it.
  EXPECT_FALSE(CheckPeerUid({.pid = 1, .uid = 0, .gid = 0}, 1000).ok());
}

TEST(AuthTest, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("secret-token", "secret-token"));
  EXPECT_FALSE(ConstantTimeEquals("secret-tokeN", "secret-token"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret-token"));
  EXPECT_FALSE(ConstantTimeEquals("secret-token-and-more", "secret-token"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(AuthTest, BearerTokenIsRequiredAndChecked) {
  constexpr absl::string_view kToken = "0123456789abcdef0123";
  EXPECT_TRUE(CheckBearerToken("Bearer 0123456789abcdef0123", kToken).ok());
  EXPECT_TRUE(CheckBearerToken("bearer  0123456789abcdef0123 ", kToken).ok());

  absl::Status missing = CheckBearerToken(std::nullopt, kToken);
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("Authorization: Bearer <token>"));

  EXPECT_THAT(std::string(CheckBearerToken("Basic dXNlcjpwYXNz", kToken).message()),
              HasSubstr("not a bearer token"));
  EXPECT_THAT(std::string(CheckBearerToken("Bearer 0123456789abcdef012", kToken).message()),
              HasSubstr("wrong bearer token"));
  EXPECT_FALSE(CheckBearerToken("Bearer ", kToken).ok());
  EXPECT_FALSE(CheckBearerToken("Bearer", kToken).ok());
  // An empty configured token never matches.
  EXPECT_FALSE(CheckBearerToken("Bearer ", "").ok());
}

}  // namespace
}  // namespace abox::http
