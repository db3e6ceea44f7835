// q8_0 rows for the KV cache (Note [A q8_0 KV cache]): the block the GGUF format
// defines (quant_blocks.h), its DType for the kernels' checks, and the one
// quantizer and dequantizer of a block that set_rows and attention use.
//
// Example
//   quantize_q8_0_block(values, rows[i]);      // 32 floats -> 34 bytes
//   dequantize_q8_0_block(rows[i], values);    // and back, exactly d * q
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/storage.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {

using Q8_0Block = quant::BlockQ8_0;
inline constexpr std::int64_t kQ8_0Values = quant::kQK;

template <>
inline constexpr DType kDTypeOf<Q8_0Block> = DType::kQ8_0;

// Quantizes 32 values as GGUF's q8_0 quantizer does (d = amax / 127 stored as f16,
// q = round(x / d)), so finite rows get the bytes quantize() writes; a block with a
// NaN or an infinity gets a NaN scale, so every value read from it is NaN.
inline void quantize_q8_0_block(const float* x, Q8_0Block& b) {
  float amax = 0.0f;
  bool finite = true;
  for (int j = 0; j < quant::kQK; ++j) {
    finite = finite && std::isfinite(x[j]);
    amax = std::max(amax, std::fabs(x[j]));
  }
  if (!finite) {
    quant::store_f16(b.d, std::numeric_limits<float>::quiet_NaN());
    for (std::int8_t& q : b.qs) q = 0;
    return;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  quant::store_f16(b.d, d);
  for (int j = 0; j < quant::kQK; ++j) {
    b.qs[j] = static_cast<std::int8_t>(std::clamp(std::round(x[j] * id), -128.0f, 127.0f));
  }
}

// The block's 32 values, each d * q exactly (an f16 scale times a byte is exact in f32).
inline void dequantize_q8_0_block(const Q8_0Block& b, float* out) {
  const float d = quant::load_f16(b.d);
  for (int j = 0; j < quant::kQK; ++j) out[j] = d * static_cast<float>(b.qs[j]);
}

}  // namespace switchyard::cpu
