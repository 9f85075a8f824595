#include "src/guest/user.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::guest {
namespace {

using ::testing::ElementsAre;

constexpr char kPasswd[] =
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "broken line\n"
    "agent:x:1001:1002:abox agent:/home/agent:/bin/bash\n";
constexpr char kGroup[] =
    "root:x:0:\n"
    "tty:x:5:\n"
    "sudo:x:27:agent,other\n"
    "agent:x:1002:\n"
    "docker:x:999:other,agent\n";

TEST(UserTest, ResolvesTheAgentUserWithItsGroups) {
  Identity id = ResolveIdentity("agent", kPasswd, kGroup);
  EXPECT_EQ(id.name, "agent");
  EXPECT_EQ(id.uid, 1001u);
  EXPECT_EQ(id.gid, 1002u);
  EXPECT_EQ(id.home, "/home/agent");
  EXPECT_EQ(id.shell, "/bin/bash");
  EXPECT_THAT(id.groups, ElementsAre(1002u, 27u, 999u));
}

TEST(UserTest, EmptyUserMeansAgent) { EXPECT_EQ(ResolveIdentity("", kPasswd, kGroup).uid, 1001u); }

TEST(UserTest, ResolvesRoot) {
  Identity id = ResolveIdentity("root", kPasswd, kGroup);
  EXPECT_EQ(id.uid, 0u);
  EXPECT_EQ(id.gid, 0u);
  EXPECT_EQ(id.home, "/root");
  EXPECT_THAT(id.groups, ElementsAre(0u));
}

TEST(UserTest, AgentFallsBackToTheUid1000Entry) {
  Identity id = ResolveIdentity("agent", "debian:x:1000:1000::/home/debian:/bin/sh\n", "");
  EXPECT_EQ(id.name, "debian");
  EXPECT_EQ(id.uid, 1000u);
  EXPECT_EQ(id.home, "/home/debian");
}

TEST(UserTest, AgentFallsBackToASynthesizedUser) {
  Identity id = ResolveIdentity("agent", "root:x:0:0::/root:/bin/sh\n", "");
  EXPECT_EQ(id.name, "agent");
  EXPECT_EQ(id.uid, kAgentFallbackUid);
  EXPECT_EQ(id.gid, kAgentFallbackUid);
  EXPECT_EQ(id.home, "/");
  EXPECT_EQ(id.shell, "/bin/sh");
}

TEST(UserTest, RootWithoutPasswdStillResolves) {
  Identity id = ResolveIdentity("root", "", "");
  EXPECT_EQ(id.uid, 0u);
  EXPECT_EQ(id.home, "/root");
}

TEST(UserTest, EmptyHomeAndShellGetDefaults) {
  Identity id = ResolveIdentity("agent", "agent:x:1000:1000:::\n", "");
  EXPECT_EQ(id.home, "/");
  EXPECT_EQ(id.shell, "/bin/sh");
}

}  // namespace
}  // namespace abox::guest
