// Case generators of the conformance harness: for an op and a binding key's dtypes,
// the operand shapes, values and params to run the kernel on.
//
// Every op of docs/ops.md has a generator. Shapes are modest (CI runs the whole
// table on two cores) but cover size 1, odd sizes and sizes that are not a multiple
// of any SIMD width; strided and broadcast variants are added only when the entry's
// caps accept them, and an entry that requires a broadcast operand gets only those.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "switchyard/binding_table.h"
#include "switchyard/kernel.h"

namespace switchyard::verify_detail {

// One operand of a case. `values` are raw: the harness rounds them to `dtype`
// (through quantize/dequantize for block types) before the kernel and the
// reference see them.
struct InputSpec {
  std::string role;
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<double> values;
  bool strided = false;
  // Dims presented with stride 0 (bit d = dim d).
  std::uint32_t broadcast_mask = 0;
};

struct Case {
  std::vector<InputSpec> inputs;
  OpParams params;
  // The params that matter, for the report ("causal, query_offset=-1").
  std::string note;
};

// The cases for `op` at `dtypes` (inputs then the output). kUnimplemented with the
// reason when the dtype list is not one the op's contract defines (wrong arity, a
// quantized operand where none is allowed, a quantized output), or when the caps
// ask for something the op cannot be given (requires_broadcast outside the
// elementwise ops).
[[nodiscard]] Result<std::vector<Case>> make_cases(OpKind op, const DTypeList& dtypes,
                                                   const KernelCaps& caps, std::mt19937_64& rng);

}  // namespace switchyard::verify_detail
