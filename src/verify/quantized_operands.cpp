#include "verify/quantized_operands.h"

#include <fmt/format.h>

#include "switchyard/quant.h"

namespace switchyard::verify_detail {

Result<std::vector<std::byte>> quantize_operand(DType dtype, const Shape& shape,
                                                std::vector<double>& values) {
  if (!can_quantize(dtype)) {
    return unimplemented_error(fmt::format("this build cannot quantize {}", name(dtype)));
  }
  const std::int64_t row = shape.inner();
  if (shape.rank() == 0 || row % block_elems(dtype) != 0) {
    return invalid_argument_error(
        fmt::format("a {} operand needs rows of whole {}-element blocks, got {}", name(dtype),
                    block_elems(dtype), shape.to_string()));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(const std::int64_t row_size, row_bytes(dtype, row));
  const std::int64_t rows = row > 0 ? shape.numel() / row : 0;
  std::vector<std::byte> bytes(static_cast<std::size_t>(rows * row_size));
  std::vector<float> src(static_cast<std::size_t>(row)), back(static_cast<std::size_t>(row));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = 0; i < row; ++i) src[i] = static_cast<float>(values[r * row + i]);
    const std::span<std::byte> block(bytes.data() + r * row_size,
                                     static_cast<std::size_t>(row_size));
    SWITCHYARD_RETURN_IF_ERROR(quantize(dtype, src, block));
    SWITCHYARD_RETURN_IF_ERROR(dequantize(dtype, block, back));
    // The reference reads what the kernel reads: the dequantized values.
    for (std::int64_t i = 0; i < row; ++i) values[r * row + i] = back[i];
  }
  return bytes;
}

}  // namespace switchyard::verify_detail
