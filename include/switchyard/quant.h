// Block quantization of the GGUF formats: bit-exact conversion between f32 and the
// block-quantized dtypes, and the one row conversion between f32 and every storage
// dtype a weight can have (f32, f16, bf16 and the block formats).
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
//
//   // Any weight dtype to any other, through f32 (what requantizing a row does):
//   SWITCHYARD_RETURN_IF_ERROR(row_to_f32(DType::kBF16, bf16_row, f32_row));
//   SWITCHYARD_RETURN_IF_ERROR(row_from_f32(DType::kQ8_0, f32_row, q8_0_row));
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

// --- Row conversion through f32 ---------------------------------------------------
//
// The dtypes these convert are the storage dtypes of weights: f32, f16, bf16 and
// every block-quantized dtype. A "row" is any run of consecutive elements; for a
// block type it must be a whole number of blocks. Every other dtype (f64, the
// integer types, bool) is refused with kInvalidArgument, as is a pair of spans
// whose sizes do not match: the byte span must hold exactly
// row_bytes(dtype, float span's size) bytes. An empty row of a supported dtype
// converts to nothing and succeeds.

// Converts src, a row of `from`, to f32 in dst. f32 is copied, f16 and bf16 are
// widened exactly (NaN and infinity kept), a block type is decoded as dequantize()
// decodes it. Errors: kInvalidArgument for an unsupported dtype or a size mismatch
// (dst.size() not whole blocks of `from`, or src not exactly
// row_bytes(from, dst.size()) bytes); dst is unchanged then.
[[nodiscard]] Status row_to_f32(DType from, std::span<const std::byte> src, std::span<float> dst);

// Converts src to a row of `to` in dst. f32 is copied; f16 and bf16 round to nearest
// even (half.h: NaN stays NaN, f16 overflow gives infinity); a block type is
// quantized as quantize() quantizes it and refused where quantize() refuses
// (NaN or infinity in src, values too large for the format's scale). Errors:
// kInvalidArgument for an unsupported dtype, a size mismatch (src.size() not whole
// blocks of `to`, or dst not exactly row_bytes(to, src.size()) bytes) or a value
// quantize() refuses; dst's contents are unspecified after a failure.
[[nodiscard]] Status row_from_f32(DType to, std::span<const float> src, std::span<std::byte> dst);

}  // namespace switchyard
