#include "switchyard/version.h"

#include <gtest/gtest.h>

namespace switchyard {
namespace {

TEST(Version, TheMacrosAndTheLibraryAgree) {
  EXPECT_EQ(kHeaderVersion.to_string(), SWITCHYARD_VERSION);
  EXPECT_EQ(library_version(), kHeaderVersion);
  EXPECT_TRUE(check_library_version().is_ok());
}

TEST(Version, BeforeOnePointZeroAMinorReleaseChangesTheAbi) {
  EXPECT_TRUE(check_abi_compatible({0, 1, 0}, {0, 1, 7}).is_ok());  // patches keep the ABI
  const Status minor = check_abi_compatible({0, 1, 0}, {0, 2, 0});
  EXPECT_EQ(minor.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(minor.message().find("0.1.0"), std::string_view::npos);
  EXPECT_NE(minor.message().find("0.2.0"), std::string_view::npos);
}

TEST(Version, FromOnePointZeroTheMajorVersionDecides) {
  EXPECT_TRUE(check_abi_compatible({1, 2, 0}, {1, 5, 3}).is_ok());
  EXPECT_FALSE(check_abi_compatible({1, 2, 0}, {2, 0, 0}).is_ok());
  EXPECT_FALSE(check_abi_compatible({2, 0, 0}, {1, 9, 9}).is_ok());
}

}  // namespace
}  // namespace switchyard
