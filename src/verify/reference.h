// The float64 references of the conformance harness, one per op of docs/ops.md.
//
// Each reference is written from the op contract with plain loops in double and
// shares no code with any kernel: a reference that borrowed a kernel's helper
// would agree with that kernel's bugs. Inputs are logical values (already rounded
// to their storage dtype, quantized tables already dequantized), contiguous and
// expanded to their full logical shape, so broadcasting and strides never reach
// this file.
#pragma once

#include <span>
#include <vector>

#include "switchyard/kernel.h"
#include "switchyard/op.h"
#include "switchyard/tensor.h"

namespace switchyard::verify_detail {

// A logical operand: row-major values of `shape`, as the kernel will read them.
struct RefTensor {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<double> values;
};

// The reference result: exact values and, per element, the magnitude the relative
// bound is taken against (see Note [Verify thresholds] in verify.h). `energy`, set
// by matmul only (empty otherwise), is per element the sum of the squared terms of
// the dot product: what |value|^2 is on average when the terms do not cancel, and
// the floor of the NMSE gate's denominator.
struct RefOutput {
  Shape shape;
  std::vector<double> values;
  std::vector<double> scale;
  std::vector<double> energy;
};

// Computes `op` on `inputs` (in key order) for an output of dtype `out_dtype`
// (which matters only to cast: float to integer rounds to nearest even and
// saturates). kInvalidArgument when the operands do not fit the op's contract,
// kOutOfRange for get_rows indices outside the table.
[[nodiscard]] Result<RefOutput> compute_reference(OpKind op, std::span<const RefTensor> inputs,
                                                  const OpParams& params, DType out_dtype);

// The integer range of an integer or bool dtype, as doubles.
[[nodiscard]] double int_dtype_min(DType t);
[[nodiscard]] double int_dtype_max(DType t);

}  // namespace switchyard::verify_detail
