#include "src/guest/egress_setup.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::guest {
namespace {

using ::testing::HasSubstr;

TEST(EgressSetupTest, ResolverUsesOnlyTheStub) {
  EXPECT_THAT(ResolvConf(), HasSubstr("\nnameserver 127.0.0.1\n"));
  EXPECT_EQ(ResolvConf().find("nameserver", ResolvConf().find("nameserver 127") + 1),
            std::string::npos);
}

TEST(EgressSetupTest, RulesetRedirectsNonLoopbackTcpAndDnsToTheAgentsPorts) {
  std::string rules = EgressRuleset({.transparent = 15001, .http_proxy = 3128, .dns = 53});
  EXPECT_THAT(rules, HasSubstr("type nat hook output priority -100;"));
  EXPECT_THAT(rules, HasSubstr("ip daddr != 127.0.0.0/8 tcp dport != 0 redirect to :15001\n"));
  EXPECT_THAT(rules, HasSubstr("ip daddr != 127.0.0.0/8 udp dport 53 redirect to :53\n"));
  EXPECT_THAT(EgressRuleset({.transparent = 1, .http_proxy = 2, .dns = 3}),
              HasSubstr("redirect to :1\n"));
}

}  // namespace
}  // namespace abox::guest
