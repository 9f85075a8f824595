#include "src/cli/output.h"

#include "gtest/gtest.h"
#include "src/cli/image_commands.h"

namespace abox::cli {
namespace {

TEST(OutputTest, FormatTableAlignsColumnsAndTrimsTrailingSpace) {
  EXPECT_EQ(FormatTable({"NAME", "SIZE"}, {{"default", "1.0 GiB"}, {"x", "2 B"}}),
            "NAME     SIZE\n"
            "default  1.0 GiB\n"
            "x        2 B\n");
}

TEST(OutputTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(900), "900 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(3ULL << 30), "3.0 GiB");
}

TEST(OutputTest, SplitPackageListAcceptsCommasAndSpaces) {
  EXPECT_EQ(SplitPackageList("vim, jq  make,,"), (std::vector<std::string>{"vim", "jq", "make"}));
  EXPECT_TRUE(SplitPackageList("").empty());
}

}  // namespace
}  // namespace abox::cli
