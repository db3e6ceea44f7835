// The prepared activation row of the packed tiles (packed_act_bytes in
// quant_packed.h), as the tile files read it. In an anonymous namespace: each
// instruction-set file that includes this compiles its own private copy with its
// own flags (quant_tile_inl.h says why).
#pragma once

#include <cstdint>

namespace switchyard::cpu {
namespace {

// K levels, then K / 32 f32 scales, then per sub-block an i32 -z * sum(q)
// (symmetric formats) or an f32 d * sum(q) (affine ones).
struct ActRow {
  const std::uint8_t* levels;
  const float* scales;
  const std::int32_t* sums;
};

ActRow act_row(const std::uint8_t* x, std::int64_t k) {
  return {x, reinterpret_cast<const float*>(x + k),
          reinterpret_cast<const std::int32_t*>(x + k) + k / 32};
}

}  // namespace
}  // namespace switchyard::cpu
