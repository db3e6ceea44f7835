// Fuzz target: the cost-expression language. The input is three formulas
// separated by newlines (flops, bytes, overhead); whatever compiles is evaluated
// for a matmul-shaped call, which must give a number or a clear error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "switchyard/cost.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace switchyard;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string_view parts[3] = {"0", "0", "0"};
  for (std::string_view& part : parts) {
    const std::size_t newline = text.find('\n');
    part = text.substr(0, newline);
    if (newline == std::string_view::npos) break;
    text.remove_prefix(newline + 1);
  }
  Result<CostExpr> expr = CostExpr::compile(parts[0], parts[1], parts[2]);
  if (!expr.is_ok()) return 0;
  (void)expr->to_string();
  const Shape shapes[] = {Shape{4, 64}, Shape{32, 64}, Shape{4, 32}};
  const DType dtypes[] = {DType::kF32, DType::kQ4_K, DType::kF32};
  const CostInputs in{.op = OpKind::kMatmul, .shapes = shapes, .dtypes = dtypes};
  (void)expr->evaluate(in);
  return 0;
}
