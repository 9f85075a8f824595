#include "src/guest/root_grow.h"

#include "gtest/gtest.h"

namespace abox::guest {
namespace {

TEST(RootGrowTest, GrowsToTheWholeBlocksOfTheDisk) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  EXPECT_EQ(GrowTarget(16 * kGiB, 4096, (2 * kGiB) / 4096), (16 * kGiB) / 4096);
  // A disk whose size is not a multiple of the block size: the partial block is left out.
  EXPECT_EQ(GrowTarget(16 * kGiB + 1000, 4096, 10), (16 * kGiB) / 4096);
}

TEST(RootGrowTest, NothingToDoWhenTheFileSystemFillsTheDisk) {
  EXPECT_EQ(GrowTarget(8192, 4096, 2), 0u);
  EXPECT_EQ(GrowTarget(8192, 4096, 3), 0u);  // never shrinks
  EXPECT_EQ(GrowTarget(8192, 0, 0), 0u);
}

}  // namespace
}  // namespace abox::guest
