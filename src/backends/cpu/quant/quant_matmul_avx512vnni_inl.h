// Inline helpers of the AVX-512 VNNI quantized matmul files
// (quant_matmul_block32_avx512vnni.cpp, quant_matmul_kquant_avx512vnni.cpp), in an
// anonymous namespace: each file compiles its own private copy (quant_tile_inl.h
// says why). Include only from those files.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "backends/cpu/quant/quant_tile_inl.h"
#include "switchyard/dtype.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// v with its 128-bit lanes 1 to R-1 replaced by lane(1) ... lane(R-1). The lane
// index of vinserti32x4 is an immediate, so the rows unfold at compile time
// rather than relying on the compiler to unroll a loop.
template <typename Lane, int... r>
inline __m512i insert_lanes_at(__m512i v, [[maybe_unused]] Lane lane,
                               std::integer_sequence<int, r...>) {
  ((v = _mm512_inserti32x4(v, lane(r + 1), r + 1)), ...);
  return v;
}
template <int R, typename Lane>
inline __m512i insert_lanes(__m512i v, Lane lane) {
  static_assert(R >= 1 && R <= 4);
  return insert_lanes_at(v, lane, std::make_integer_sequence<int, R - 1>{});
}

template <typename T, std::size_t N>
inline __m512i load_table(const std::array<T, N>& a) {
  static_assert(sizeof(T) * N == 64);
  return _mm512_loadu_si512(a.data());
}

// The 16 levels of a table format plus 128, as unsigned bytes, in every lane.
template <DType W>
constexpr std::array<std::uint8_t, 64> biased_table() {
  std::array<std::uint8_t, 64> a{};
  for (int i = 0; i < 64; ++i) {
    const int v = W == DType::kIQ4_NL ? quant::kIQ4NLValues[i % 16] : quant::kMXFP4Values[i % 16];
    a[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v + 128);
  }
  return a;
}

// vpmultishiftqb, vpermt2b (AVX512_VBMI) and vgf2p8affineqb (GFNI) as inline
// assembly: the files are compiled for the AVX-512 subset every registered CPU
// has, and the tiles using these are chosen at run time (kExtVbmi, kExtGfni).
// Compiling the files for the extensions instead would let the compiler use them
// anywhere in them.
//
// The extensions some tiles use, chosen once per call from cpu_features() (bits
// of the tiles' kExt):
// q2_k level indices (Note [GFNI level bits]); with kExtVbmi, q3_k's levels and
// scales (Note [q3_k with GFNI and VBMI]).
constexpr unsigned kExtGfni = 1;
// q5_0 / q5_1 fifth bits (Note [Fifth bits]); with kExtGfni, q3_k's.
constexpr unsigned kExtVbmi = 2;
inline __m512i multishift_bytes(__m512i control, __m512i data) {
  __m512i r;
  asm("vpmultishiftqb %2, %1, %0" : "=v"(r) : "v"(control), "v"(data));
  return r;
}
// Byte i of the result: byte idx_i % 64 of a, or of b where bit 6 of idx_i is set.
inline __m512i permute2_bytes(__m512i a, __m512i idx, __m512i b) {
  asm("vpermt2b %2, %1, %0" : "+v"(a) : "v"(idx), "v"(b));
  return a;
}
// Each byte of x through the 8 x 8 bit matrix of its 64-bit lane of `matrix`.
inline __m512i affine_bytes(__m512i x, __m512i matrix) {
  __m512i r;
  asm("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(x), "v"(matrix));
  return r;
}

// Weight rows per parallel task, and per tile inside a task: a tile's rows stay
// in L2 while every group of four activation rows passes over them.
constexpr std::int64_t kRowGrain = 16;
constexpr std::int64_t kTileRows = 64;

}  // namespace
}  // namespace switchyard::cpu
