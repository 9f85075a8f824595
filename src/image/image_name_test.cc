#include "src/image/image_name.h"

#include <string>

#include "gtest/gtest.h"

namespace abox::image {
namespace {

TEST(ImageNameTest, ValidatesImageNames) {
  EXPECT_TRUE(ValidateImageName("default").ok());
  EXPECT_TRUE(ValidateImageName("py3.11_big-1").ok());
  for (const char* bad : {"", ".hidden", "..", "a/b", "Upper", "with space", "-x"}) {
    EXPECT_EQ(ValidateImageName(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ValidateImageName(std::string(65, 'a')).ok());
}

}  // namespace
}  // namespace abox::image
