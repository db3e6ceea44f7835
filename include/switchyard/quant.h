// Block quantization of the GGUF formats: bit-exact conversion between f32 and the
// block-quantized dtypes.
//
// Layouts follow the GGUF specification byte for byte, so a block written here
// decodes identically in any conforming GGUF reader and the other way round.
// Quantization uses the rounding and scale search of the format's reference
// quantizer, so quantizing the same data gives the same bytes.
//
// Example
//   std::vector<std::byte> q(*row_bytes(DType::kQ4_K, 4096));
//   SWITCHYARD_RETURN_IF_ERROR(quantize(DType::kQ4_K, src, q));
//   SWITCHYARD_RETURN_IF_ERROR(dequantize(DType::kQ4_K, q, back));
#pragma once

#include <cstddef>
#include <span>

#include "switchyard/dtype.h"

namespace switchyard {

// Quantizes src (a whole number of blocks of `t`) into dst, which must hold exactly
// row_bytes(t, src.size()) bytes. kInvalidArgument on a size mismatch, on a dtype
// that is not block-quantized, on NaN or infinity in src, and on a block whose
// values are too large for the format's f16 scale (the reference quantizer would
// write an infinite scale there). dst's contents are unspecified after a failure.
[[nodiscard]] Status quantize(DType t, std::span<const float> src, std::span<std::byte> dst);

// Dequantizes src (exactly row_bytes(t, dst.size()) bytes of `t`) into dst.
[[nodiscard]] Status dequantize(DType t, std::span<const std::byte> src, std::span<float> dst);

// Whether quantize() supports `t` (activation-only formats such as q8_1 and q8_k
// are quantized too; every quantized dtype is dequantizable).
[[nodiscard]] bool can_quantize(DType t);

}  // namespace switchyard
