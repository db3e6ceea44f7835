#include "switchyard/status.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace switchyard {
namespace {

struct TestPayload : StatusPayload {
  int value = 0;
};
struct OtherPayload : StatusPayload {};

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument_error("not positive");
  return v;
}

Status double_positive(int v, int& out) {
  SWITCHYARD_ASSIGN_OR_RETURN(int parsed, parse_positive(v));
  out = parsed * 2;
  return Status::ok();
}

Status chain(int v) {
  int ignored = 0;
  SWITCHYARD_RETURN_IF_ERROR(double_positive(v, ignored));
  return Status::ok();
}

TEST(StatusTest, OkIsEmptyAndFailuresCarryCodeMessageAndPayload) {
  Status ok;
  EXPECT_TRUE(ok.is_ok());
  EXPECT_EQ(ok.code(), StatusCode::kOk);
  EXPECT_EQ(ok.to_string(), "ok");

  auto payload = std::make_shared<TestPayload>();
  payload->value = 7;
  Status s(StatusCode::kNotFound, "missing", payload);
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.to_string(), "not_found: missing");
  ASSERT_NE(s.payload<TestPayload>(), nullptr);
  EXPECT_EQ(s.payload<TestPayload>()->value, 7);
  EXPECT_EQ(s.payload<OtherPayload>(), nullptr);

  Status wrapped = s.with_context("loading model");
  EXPECT_EQ(wrapped.message(), "loading model: missing");
  EXPECT_EQ(wrapped.payload<TestPayload>()->value, 7);
}

TEST(StatusTest, EveryCodeHasAName) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    EXPECT_NE(status_code_name(static_cast<StatusCode>(c)), "unknown");
  }
}

TEST(ResultTest, ValueAndErrorPathsAndMacros) {
  int out = 0;
  EXPECT_TRUE(double_positive(4, out).is_ok());
  EXPECT_EQ(out, 8);
  Status bad = double_positive(-1, out);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(chain(-3).message(), "not positive");
  EXPECT_TRUE(chain(3).is_ok());

  Result<std::string> r = std::string("hello");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->size(), 5u);
  EXPECT_TRUE(r.status().is_ok());
  std::string moved = std::move(r).value();
  EXPECT_EQ(moved, "hello");
}

TEST(ResultDeathTest, ValueOfAFailureAborts) {
  Result<int> r = not_found_error("nothing here");
  EXPECT_DEATH((void)r.value(), "nothing here");
}

TEST(ResultDeathTest, ResultFromOkStatusAborts) {
  EXPECT_DEATH({ Result<int> r = Status::ok(); }, "ok Status");
}

}  // namespace
}  // namespace switchyard

namespace switchyard {
namespace {

TEST(Printable, KeepsPrintableAsciiAndEscapesEverythingElse) {
  EXPECT_EQ(printable("blk.0.attn_q.weight"), "blk.0.attn_q.weight");
  EXPECT_EQ(printable("a\nb"), "a\\x0ab");
  EXPECT_EQ(printable("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(printable("back\\slash"), "back\\x5cslash");
  EXPECT_EQ(printable("gr\xc3\xbc\xc3\x9f"), "gr\\xc3\\xbc\\xc3\\x9f");
  EXPECT_EQ(printable(std::string_view("a\0b", 3)), "a\\x00b");
}

TEST(Printable, CutsLongTextAndSaysHowLongItWas) {
  const std::string long_text(1000, 'x');
  const std::string out = printable(long_text, 20);
  EXPECT_EQ(out, std::string(20, 'x') + "... (1000 bytes)");
  // An escape is never cut in half.
  const std::string escaped = printable(std::string(30, '\n'), 10);
  EXPECT_EQ(escaped, "\\x0a\\x0a... (30 bytes)");
}

}  // namespace
}  // namespace switchyard
