// Scalar helpers of the dense matmul family for the float storage types (f32, f16,
// bf16): element sizes and element-wise loads and stores through byte pointers.
// Portable code; the ISA files have their own vector conversions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "switchyard/dtype.h"
#include "switchyard/half.h"

namespace switchyard::cpu {

// Bytes of one element of a float storage type.
[[nodiscard]] constexpr std::int64_t float_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

// Element i of a float-storage array as f32 (exact).
[[nodiscard]] inline float load_float(DType t, const std::byte* p, std::int64_t i) {
  if (t == DType::kF32) return reinterpret_cast<const float*>(p)[i];
  const std::uint16_t h = reinterpret_cast<const std::uint16_t*>(p)[i];
  return t == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// Stores v as element i, rounding once to nearest even for f16 / bf16.
inline void store_float(DType t, std::byte* p, std::int64_t i, float v) {
  if (t == DType::kF32) {
    reinterpret_cast<float*>(p)[i] = v;
  } else {
    reinterpret_cast<std::uint16_t*>(p)[i] = t == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
  }
}

}  // namespace switchyard::cpu
