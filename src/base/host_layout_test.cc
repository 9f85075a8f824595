#include "src/base/host_layout.h"

#include <unistd.h>

#include <map>

#include "gtest/gtest.h"

namespace abox::base {
namespace {

GetEnvFn FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(HostLayoutTest, ExplicitVariablesWin) {
  auto p = ResolveHostLayout(FakeEnv({{"ABOX_HOME", "/data/abox"},
                                      {"ABOX_CACHE_DIR", "/fast/cache/"},
                                      {"XDG_CACHE_HOME", "/xdg/cache"},
                                      {"HOME", "/home/u"}}));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->home, "/data/abox");
  EXPECT_EQ(p->cache_dir, "/fast/cache/");
  EXPECT_EQ(p->ImageDir("default"), "/data/abox/images/default");
  EXPECT_EQ(p->LogsDir(), "/fast/cache/logs");
}

TEST(HostLayoutTest, FallsBackToXdgThenHome) {
  auto p = ResolveHostLayout(FakeEnv({{"XDG_CACHE_HOME", "/xdg/cache"}, {"HOME", "/home/u"}}));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->home, "/home/u/.local/share/abox");
  EXPECT_EQ(p->cache_dir, "/xdg/cache/abox");

  p = ResolveHostLayout(FakeEnv({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "relative"}}));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->cache_dir, "/home/u/.cache/abox");  // Relative XDG values are ignored.
}

TEST(HostLayoutTest, RejectsRelativeAboxHome) {
  auto p = ResolveHostLayout(FakeEnv({{"ABOX_HOME", "abox"}, {"HOME", "/home/u"}}));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("ABOX_HOME"), std::string::npos);
}

TEST(SocketPathTest, AboxSocketWinsThenXdgRuntimeDirThenAboxHome) {
  EXPECT_EQ(
      *ResolveSocketPath(FakeEnv({{"ABOX_SOCKET", "/x/y.sock"}, {"XDG_RUNTIME_DIR", "/run/u"}})),
      "/x/y.sock");
  EXPECT_EQ(*ResolveSocketPath(FakeEnv({{"XDG_RUNTIME_DIR", "/run/user/7"}})),
            "/run/user/7/abox/aboxd.sock");
  // Without a runtime directory: under $ABOX_HOME (the user's own), never a shared /tmp path
  // that another user could create first.
  EXPECT_EQ(*ResolveSocketPath(FakeEnv({{"XDG_RUNTIME_DIR", "relative"}, {"ABOX_HOME", "/h/a"}})),
            "/h/a/run/aboxd.sock");
  EXPECT_EQ(*ResolveSocketPath(FakeEnv({{"HOME", "/home/u"}})),
            "/home/u/.local/share/abox/run/aboxd.sock");
  EXPECT_EQ(*ResolveSocketPath(FakeEnv({{"XDG_DATA_HOME", "/d"}, {"HOME", "/home/u"}})),
            "/d/abox/run/aboxd.sock");
  EXPECT_EQ(ResolveSocketPath(FakeEnv({{"ABOX_HOME", "rel"}})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveSocketPath(FakeEnv({{"ABOX_SOCKET", "rel.sock"}})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace abox::base
