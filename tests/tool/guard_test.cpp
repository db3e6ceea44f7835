// The tool's last-resort handler, the function main() runs every command through.
#include "../../tools/switchyard/guard.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <system_error>
#include <thread>

namespace switchyard::tool {
namespace {

TEST(ToolGuard, PassesTheCommandsStatusThrough) {
  EXPECT_EQ(run_guarded([] { return kExitOk; }), kExitOk);
  EXPECT_EQ(run_guarded([] { return kExitUsage; }), kExitUsage);
}

TEST(ToolGuard, AnEscapedExceptionIsOneLineAndExitOne) {
  testing::internal::CaptureStderr();
  const int status = run_guarded([]() -> int { throw std::runtime_error("boom\nsecond line"); });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, kExitCheckFailed);
  EXPECT_EQ(err, "switchyard: internal error: boom\\x0asecond line\n");
}

TEST(ToolGuard, AnExceptionOfAnyTypeIsCaught) {
  testing::internal::CaptureStderr();
  const int status = run_guarded([]() -> int { throw 42; });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, kExitCheckFailed);
  EXPECT_NE(err.find("internal error"), std::string::npos);
}

TEST(ToolGuardDeathTest, AnExceptionOnAnotherThreadEndsInOneLineNotAnAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::set_terminate(&terminate_in_one_line);
        std::thread([] { throw std::logic_error("lost on a worker"); }).join();
      },
      ::testing::ExitedWithCode(kExitCheckFailed), "internal error: lost on a worker");
}

}  // namespace
}  // namespace switchyard::tool
