#include "src/net/host_name.h"

#include <string>

#include "gtest/gtest.h"

namespace abox::net {
namespace {

TEST(HostNameTest, LowercasesAndStripsOneTrailingDot) {
  EXPECT_EQ(*NormalizeHostName("API.GitHub.com."), "api.github.com");
  EXPECT_EQ(*NormalizeHostName("localhost"), "localhost");
  EXPECT_EQ(*NormalizeHostName("xn--bcher-kva.example"), "xn--bcher-kva.example");
  EXPECT_EQ(*NormalizeHostName("a-b.c0.example"), "a-b.c0.example");
  EXPECT_EQ(*NormalizeHostName("1password.com"), "1password.com");
}

TEST(HostNameTest, AcceptsLimitsExactly) {
  std::string label63(63, 'a');
  EXPECT_TRUE(NormalizeHostName(label63 + ".example").ok());
  EXPECT_FALSE(NormalizeHostName(label63 + "a.example").ok());
  // 4 * 63 + 3 dots = 255 > 253; trim to exactly 253.
  std::string name = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  ASSERT_EQ(name.size(), 253u);
  EXPECT_TRUE(NormalizeHostName(name).ok());
  EXPECT_TRUE(NormalizeHostName(name + ".").ok());
  EXPECT_FALSE(NormalizeHostName(name + "b").ok());
}

TEST(HostNameTest, RefusesWhatIsNotAHostName) {
  for (std::string bad :
       {std::string(""), std::string("."), std::string("a..b"), std::string(".a.b"),
        std::string("a.b.."), std::string("-a.example"), std::string("a-.example"),
        std::string("a_b.example"), std::string("a b.example"), std::string("a.example/x"),
        std::string("b\xc3\xbc"
                    "cher.example"),
        std::string("a.example\0.evil", 15), std::string("127.0.0.1"), std::string("127.1"),
        std::string("0x7f000001"), std::string("example.123"), std::string("*.example.com"),
        std::string("a:80")}) {
    absl::StatusOr<std::string> result = NormalizeHostName(bad);
    EXPECT_FALSE(result.ok()) << bad;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_NE(NormalizeHostName("b\xc3\xbc"
                              "cher.example")
                .status()
                .message()
                .find("IDNA"),
            std::string::npos);
  EXPECT_NE(NormalizeHostName(std::string("a\0b", 3)).status().message().find("\\x00"),
            std::string::npos);
}

TEST(HostNameTest, MatchesSubdomainsOnLabelBoundaries) {
  EXPECT_TRUE(IsSubdomainOrSelf("example.com", "example.com"));
  EXPECT_TRUE(IsSubdomainOrSelf("a.b.example.com", "example.com"));
  EXPECT_FALSE(IsSubdomainOrSelf("badexample.com", "example.com"));
  EXPECT_FALSE(IsSubdomainOrSelf("example.com.evil", "example.com"));
  EXPECT_FALSE(IsSubdomainOrSelf("com", "example.com"));
}

}  // namespace
}  // namespace abox::net
