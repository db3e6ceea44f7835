#include "switchyard/environment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "switchyard/registry.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

using ::testing::HasSubstr;

TEST(Environment, EveryVariableHasANameAndAMeaning) {
  for (EnvVar v : kAllEnvVars) {
    EXPECT_TRUE(name(v).starts_with("SWITCHYARD_")) << name(v);
    EXPECT_FALSE(meaning(v).empty()) << name(v);
  }
}

TEST(Environment, AMisspeltNameIsRefusedAndTheKnownOnesListed) {
  ASSERT_EQ(setenv("SWITCHYARD_STRICT_KERNEL", "1", 1), 0);
  const Status status = check_environment();
  unsetenv("SWITCHYARD_STRICT_KERNEL");
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("SWITCHYARD_STRICT_KERNEL is not a Switchyard variable"));
  EXPECT_THAT(status.message(), HasSubstr("SWITCHYARD_STRICT_KERNELS"));
}

TEST(Environment, OtherVariablesAreNotOurs) {
  ASSERT_EQ(setenv("SWITCHYARDX", "1", 1), 0);
  ASSERT_EQ(setenv("NOT_SWITCHYARD_THING", "1", 1), 0);
  const std::vector<std::string> before = environment_problems();
  const Status status = check_environment();
  unsetenv("SWITCHYARDX");
  unsetenv("NOT_SWITCHYARD_THING");
  if (before.empty()) {
    EXPECT_TRUE(status.is_ok()) << status.to_string();
  }
}

// Readers run once per process, so these run in a fresh one (tests/main.cpp
// publishes nothing there).
TEST(EnvironmentDeathTest, AStrictTypoMakesEverythingStrictAndIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("SWITCHYARD_STRICT_KERNELS", "matmull", 1);
        const RegistryConfig& c = RegistryConfig::from_environment();
        const Status env = check_environment();
        const bool ok = c.strict.mode == StrictPolicy::Mode::kAll && !env.is_ok() &&
                        env.message().find("'matmull'") != std::string::npos &&
                        env.message().find("strict mode is on for every op") != std::string::npos;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(EnvironmentDeathTest, ABadThreadCountFallsBackAndIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("SWITCHYARD_THREADS", "99999999999", 1);
        const int threads = default_thread_count();
        const Status env = check_environment();
        const bool ok = threads >= 1 && threads <= kMaxThreads && !env.is_ok() &&
                        env.message().find("SWITCHYARD_THREADS") != std::string::npos;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(EnvironmentDeathTest, AnUnusableRegistrySwitchLeavesItOn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("SWITCHYARD_KERNEL_REGISTRY", "nope", 1);
        const RegistryConfig& c = RegistryConfig::from_environment();
        const bool ok = c.enabled && !check_environment().is_ok();
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace switchyard
