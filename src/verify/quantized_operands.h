// Block-quantized operands for the conformance harness: the case's f32 data is
// quantized with switchyard::quantize and the values the reference reads are the
// dequantized ones, so the reference checks the kernel's arithmetic, not the
// format's rounding.
#pragma once

#include <cstddef>
#include <vector>

#include "switchyard/tensor.h"

namespace switchyard::verify_detail {

// Quantizes `values` (row-major over `shape`, rows along the last dimension) to
// `dtype` and replaces them with their dequantized values. Returns the bytes.
// kInvalidArgument when the last dimension is not a whole number of blocks;
// kUnimplemented when this build cannot quantize `dtype`.
[[nodiscard]] Result<std::vector<std::byte>> quantize_operand(DType dtype, const Shape& shape,
                                                              std::vector<double>& values);

}  // namespace switchyard::verify_detail
