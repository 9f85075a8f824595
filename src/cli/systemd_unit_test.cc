#include "src/cli/systemd_unit.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::cli {
namespace {

using ::testing::HasSubstr;

TEST(SystemdUnitTest, SimpleServiceRestartedOnFailure) {
  std::string unit =
      SystemdUnit({"/opt/abox/bin/aboxd", "--socket", "/run/user/1000/abox/aboxd.sock"},
                  {{"ABOX_HOME", "/home/me/.local/share/abox"}});
  EXPECT_THAT(unit, HasSubstr("\n[Service]\nType=simple\n"));
  EXPECT_THAT(unit, HasSubstr("\nExecStart=/opt/abox/bin/aboxd --socket "
                              "/run/user/1000/abox/aboxd.sock\n"));
  EXPECT_THAT(unit, HasSubstr("\nEnvironment=ABOX_HOME=/home/me/.local/share/abox\n"));
  EXPECT_THAT(unit, HasSubstr("\nRestart=on-failure\n"));
  EXPECT_THAT(unit, HasSubstr("\n[Install]\nWantedBy=default.target\n"));
  EXPECT_THAT(unit, HasSubstr("# or save this file as ~/.config/systemd/user/aboxd.service"));
  EXPECT_THAT(unit, HasSubstr(kSystemdEnableCommand));
}

TEST(SystemdUnitTest, EscapesSpacesQuotesSpecifiersAndVariables) {
  std::string unit = SystemdUnit({"/home/me/my tools/aboxd", "--socket", "/tmp/100%$x.sock"},
                                 {{"ABOX_HOME", "/home/me/a \"b\""}});
  EXPECT_THAT(unit,
              HasSubstr("ExecStart=\"/home/me/my tools/aboxd\" --socket /tmp/100%%$$x.sock\n"));
  EXPECT_THAT(unit, HasSubstr("Environment=\"ABOX_HOME=/home/me/a \\\"b\\\"\"\n"));
}

}  // namespace
}  // namespace abox::cli
