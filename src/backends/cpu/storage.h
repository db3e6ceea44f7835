// Storage types of the CPU kernels' dense float operands, as C++ types, and their
// scalar conversions to and from f32.
//
// f16 and bf16 are 16-bit patterns, so each gets a distinct one-member struct: a
// kernel template instantiated for `F16` cannot be confused with one for `BF16`, and
// a `const F16*` never aliases a `const BF16*` by accident. Both structs are the
// size and alignment of std::uint16_t, so a tensor's bytes are read through them
// directly.
//
// This header depends on nothing but half.h so that the instruction-set files
// (`*_avx2.cpp`, `*_avx512.cpp`) can include it without pulling templates of other
// libraries into a translation unit compiled for a wider ISA.
#pragma once

#include <cstdint>

#include "switchyard/dtype.h"
#include "switchyard/half.h"

namespace switchyard::cpu {

struct F16 {
  std::uint16_t bits;
};
struct BF16 {
  std::uint16_t bits;
};
static_assert(sizeof(F16) == 2 && alignof(F16) == 2);
static_assert(sizeof(BF16) == 2 && alignof(BF16) == 2);

// The DType of each storage type.
template <typename S>
inline constexpr DType kDTypeOf = DType::kF32;
template <>
inline constexpr DType kDTypeOf<F16> = DType::kF16;
template <>
inline constexpr DType kDTypeOf<BF16> = DType::kBF16;
template <>
inline constexpr DType kDTypeOf<std::int32_t> = DType::kI32;

[[nodiscard]] inline float to_f32(float v) { return v; }
[[nodiscard]] inline float to_f32(F16 v) { return f16_to_f32(v.bits); }
[[nodiscard]] inline float to_f32(BF16 v) { return bf16_to_f32(v.bits); }

// Rounds once, to nearest even (the identity for f32).
template <typename S>
[[nodiscard]] S from_f32(float v);
template <>
[[nodiscard]] inline float from_f32<float>(float v) {
  return v;
}
template <>
[[nodiscard]] inline F16 from_f32<F16>(float v) {
  return F16{f32_to_f16(v)};
}
template <>
[[nodiscard]] inline BF16 from_f32<BF16>(float v) {
  return BF16{f32_to_bf16(v)};
}

// Index of a float storage type in per-dtype tables: f32 0, f16 1, bf16 2.
enum class FloatStorage : std::uint8_t { kF32, kF16, kBF16 };
inline constexpr int kFloatStorageCount = 3;

template <typename S>
inline constexpr FloatStorage kStorageOf = FloatStorage::kF32;
template <>
inline constexpr FloatStorage kStorageOf<F16> = FloatStorage::kF16;
template <>
inline constexpr FloatStorage kStorageOf<BF16> = FloatStorage::kBF16;

}  // namespace switchyard::cpu
