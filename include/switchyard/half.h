// Conversions between f32 and the 16-bit float storage types f16 (IEEE binary16)
// and bf16 (bfloat16). Round to nearest even; NaN stays NaN; overflow to f16
// gives infinity. Portable scalar code: SIMD kernels have their own conversions and
// are verified against these.
#pragma once

#include <bit>
#include <cstdint>

namespace switchyard {

[[nodiscard]] inline float bf16_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

[[nodiscard]] inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // Quiet the NaN and keep its sign; truncation alone could make it infinity.
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

[[nodiscard]] inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) {  // infinity or NaN
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // Subnormal: value is mantissa * 2^-24, exact in f32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

[[nodiscard]] inline std::uint16_t f32_to_f16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero in f16: scale so the f16 subnormal step (2^-24)
    // becomes 1, then round to nearest even through the float adder.
    const float magnitude = std::bit_cast<float>(abs);
    const float scaled = magnitude * 0x1p24f;  // exact
    // Adding and subtracting 2^23 rounds to an integer with ties to even.
    const float rounded = (scaled + 0x1p23f) - 0x1p23f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(rounded));
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to even.
  const std::uint32_t rebiased = abs - (112u << 23);
  const std::uint32_t rounding = 0xfffu + ((rebiased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rebiased + rounding) >> 13));
}

}  // namespace switchyard
