// Byte layouts of the GGUF block-quantized formats, and the small helpers that
// quantizers, dequantizers and the kernels of every backend share. Part of the
// quant layer's public API so that a backend reads blocks through the same structs
// the quantizers write (docs/architecture.md: backends sit above quant).
//
// Every block is a struct of byte arrays (alignment 1), so a block may sit at any
// address: GGUF rows of 17-, 18- or 22-byte blocks put blocks at odd offsets. The
// multi-byte fields (f16 scales, the f32 scale of q8_k, q8_k's i16 sums) are read
// and written little-endian through the accessors below, as GGUF stores them.
// Field order and sizes follow the GGUF specification exactly; the static_asserts
// tie each struct to the block size in dtype.def.
//
// Example
//   const auto* b = reinterpret_cast<const quant::BlockQ4_0*>(row);
//   float scale = quant::load_f16(b->d);
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "switchyard/dtype.h"
#include "switchyard/half.h"

namespace switchyard::quant {

inline constexpr int kQK = 32;    // elements of a small block
inline constexpr int kQKK = 256;  // elements of a k-quant super-block

// q4_0: x = d * (q - 8), q in [0, 15]. Element j of the block is the low nibble of
// qs[j] for j < 16 and the high nibble of qs[j - 16] otherwise.
struct BlockQ4_0 {
  std::uint8_t d[2];
  std::uint8_t qs[16];
};
// q4_1: x = d * q + m, q in [0, 15]; nibbles as q4_0.
struct BlockQ4_1 {
  std::uint8_t d[2];
  std::uint8_t m[2];
  std::uint8_t qs[16];
};
// q5_0: x = d * (q - 16), q in [0, 31]; the low four bits as q4_0, the fifth bit of
// element j is bit j of the little-endian 32-bit word qh.
struct BlockQ5_0 {
  std::uint8_t d[2];
  std::uint8_t qh[4];
  std::uint8_t qs[16];
};
// q5_1: x = d * q + m, q in [0, 31]; bits as q5_0.
struct BlockQ5_1 {
  std::uint8_t d[2];
  std::uint8_t m[2];
  std::uint8_t qh[4];
  std::uint8_t qs[16];
};
// q8_0: x = d * q, q a signed byte.
struct BlockQ8_0 {
  std::uint8_t d[2];
  std::int8_t qs[32];
};
// q8_1: q8_0 plus s = d * sum(q), the activation side of the q4_1 / q5_1 dot.
struct BlockQ8_1 {
  std::uint8_t d[2];
  std::uint8_t s[2];
  std::int8_t qs[32];
};
// q2_k: 16 groups of 16; scales[g] holds the group's 4-bit scale (low nibble) and
// 4-bit min (high nibble): x = d * sc * q - dmin * m, q in [0, 3].
struct BlockQ2_K {
  std::uint8_t scales[16];
  std::uint8_t qs[64];
  std::uint8_t d[2];
  std::uint8_t dmin[2];
};
// q3_k: 16 groups of 16 with 6-bit signed scales (stored + 32) packed in 12 bytes;
// x = d * (sc - 32) * (q - 4), q in [0, 7] with its third bit in hmask.
struct BlockQ3_K {
  std::uint8_t hmask[32];
  std::uint8_t qs[64];
  std::uint8_t scales[12];
  std::uint8_t d[2];
};
// q4_k: 8 groups of 32 with 6-bit scales and mins packed in 12 bytes;
// x = d * sc * q - dmin * m, q in [0, 15].
struct BlockQ4_K {
  std::uint8_t d[2];
  std::uint8_t dmin[2];
  std::uint8_t scales[12];
  std::uint8_t qs[128];
};
// q5_k: q4_k with a fifth bit per element in qh, q in [0, 31].
struct BlockQ5_K {
  std::uint8_t d[2];
  std::uint8_t dmin[2];
  std::uint8_t scales[12];
  std::uint8_t qh[32];
  std::uint8_t qs[128];
};
// q6_k: 16 groups of 16 with signed 8-bit scales; x = d * sc * (q - 32), q in
// [0, 63], low four bits in ql and the top two in qh.
struct BlockQ6_K {
  std::uint8_t ql[128];
  std::uint8_t qh[64];
  std::int8_t scales[16];
  std::uint8_t d[2];
};
// q8_k: the activation format of the k-quant dots. f32 scale, 256 signed bytes and
// the sums of each group of 16 (i16), so a dot can apply per-group mins cheaply.
struct BlockQ8_K {
  std::uint8_t d[4];
  std::int8_t qs[256];
  std::uint8_t bsums[32];
};
// iq4_nl: x = d * kIQ4NLValues[q]; nibbles as q4_0.
struct BlockIQ4_NL {
  std::uint8_t d[2];
  std::uint8_t qs[16];
};
// iq4_xs: 8 groups of 32 with 6-bit scales (stored + 32): low four bits in
// scales_l (two a byte), top two bits in the 16-bit scales_h;
// x = d * (sc - 32) * kIQ4NLValues[q]. Each group's nibbles are laid out as iq4_nl.
struct BlockIQ4_XS {
  std::uint8_t d[2];
  std::uint8_t scales_h[2];
  std::uint8_t scales_l[4];
  std::uint8_t qs[128];
};
// mxfp4: an E8M0 exponent e and 32 E2M1 codes; nibbles as q4_0.
struct BlockMXFP4 {
  std::uint8_t e;
  std::uint8_t qs[16];
};

template <typename Block>
constexpr bool block_matches(DType t, int elems) {
  return block_bytes(t) == static_cast<std::int32_t>(sizeof(Block)) && block_elems(t) == elems;
}
static_assert(block_matches<BlockQ4_0>(DType::kQ4_0, kQK));
static_assert(block_matches<BlockQ4_1>(DType::kQ4_1, kQK));
static_assert(block_matches<BlockQ5_0>(DType::kQ5_0, kQK));
static_assert(block_matches<BlockQ5_1>(DType::kQ5_1, kQK));
static_assert(block_matches<BlockQ8_0>(DType::kQ8_0, kQK));
static_assert(block_matches<BlockQ8_1>(DType::kQ8_1, kQK));
static_assert(block_matches<BlockQ2_K>(DType::kQ2_K, kQKK));
static_assert(block_matches<BlockQ3_K>(DType::kQ3_K, kQKK));
static_assert(block_matches<BlockQ4_K>(DType::kQ4_K, kQKK));
static_assert(block_matches<BlockQ5_K>(DType::kQ5_K, kQKK));
static_assert(block_matches<BlockQ6_K>(DType::kQ6_K, kQKK));
static_assert(block_matches<BlockQ8_K>(DType::kQ8_K, kQKK));
static_assert(block_matches<BlockIQ4_NL>(DType::kIQ4_NL, kQK));
static_assert(block_matches<BlockIQ4_XS>(DType::kIQ4_XS, kQKK));
static_assert(block_matches<BlockMXFP4>(DType::kMXFP4, kQK));

// The 16 non-linear levels of iq4_nl and iq4_xs (signed, in units of the scale).
inline constexpr std::int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};
// The E2M1 values of mxfp4, doubled so they are integers: code c means
// kMXFP4Values[c] / 2 (0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6); bit 3 is the sign.
inline constexpr std::int8_t kMXFP4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                                 0, -1, -2, -3, -4, -6, -8, -12};

[[nodiscard]] inline float load_f16(const std::uint8_t* p) {
  return f16_to_f32(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}
inline void store_f16(std::uint8_t* p, float v) {
  const std::uint16_t h = f32_to_f16(v);
  p[0] = static_cast<std::uint8_t>(h & 0xff);
  p[1] = static_cast<std::uint8_t>(h >> 8);
}
[[nodiscard]] inline float load_f32(const std::uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_f32(std::uint8_t* p, float v) { std::memcpy(p, &v, sizeof v); }
[[nodiscard]] inline std::uint32_t load_u32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
[[nodiscard]] inline std::int16_t load_i16(const std::uint8_t* p) {
  return static_cast<std::int16_t>(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}
inline void store_i16(std::uint8_t* p, int v) {
  const auto u = static_cast<std::uint16_t>(v);
  p[0] = static_cast<std::uint8_t>(u & 0xff);
  p[1] = static_cast<std::uint8_t>(u >> 8);
}

// An E8M0 exponent as the mxfp4 scale: 2^(e - 127) halved, because the codes
// above are doubled. Built from bits (kernels call it per block): exponent field
// e - 1 for e >= 2; e = 1 and 0 give the f32 subnormals 2^-127 and 2^-128.
[[nodiscard]] inline float e8m0_half(std::uint8_t e) {
  const std::uint32_t bits = e >= 2 ? static_cast<std::uint32_t>(e - 1) << 23 : 0x00200000u << e;
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 puts the
// integer part in the low mantissa bits (the reference quantizers round this way).
[[nodiscard]] inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  std::int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// The 6-bit scale and min of group j (0..7) of a q4_k / q5_k block: groups 0-3 keep
// theirs in the low six bits of bytes j and j + 4; groups 4-7 split theirs into a
// nibble of byte j + 4 and the top two bits of bytes j - 4 and j.
inline void k4_scale_min(int j, const std::uint8_t* s, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The signed scale of group j (0..15) of a q3_k block: low nibble from byte j (or
// the high nibble of byte j - 8), top two bits from byte 8 + j % 4 at bit 2 * (j / 4).
[[nodiscard]] inline int q3k_scale(int j, const std::uint8_t* s) {
  const int low = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// The signed scale of group j (0..7) of an iq4_xs block.
[[nodiscard]] inline int iq4xs_scale(int j, const BlockIQ4_XS& b) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0xf;
  const int high = ((b.scales_h[0] | (b.scales_h[1] << 8)) >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

// Dequantizes `n` elements (a whole number of blocks, unchecked) of a quantized
// row to f32. The kernels' inner helper; the checked entry point is dequantize().
void dequantize_row(DType t, const void* src, float* dst, std::int64_t n);

// Quantizes `n` finite elements (a whole number of blocks, unchecked) to `t` with
// the reference rounding. The checked entry point is quantize().
void quantize_row(DType t, const float* src, void* dst, std::int64_t n);

}  // namespace switchyard::quant
