// The GGUF block formats as the CUDA kernels read them: each format turns one
// 32-element chunk of a block into 32 signed 8-bit levels and, per group of 16, a
// scale and an offset, so that element j of the chunk is
//
//   scale[j / 16] * level[j] + offset[j / 16]
//
// exactly as the CPU's dequantizer computes it (src/quant/quant.cpp). The byte
// layouts are those of include/switchyard/quant_blocks.h (this file cannot include
// it, Note [Thin .cu files] in device.h): the offsets below are its fields'.
//
// Note [Reading blocks on the device]
// GGUF blocks are 17 to 210 bytes, so most blocks of a row sit at addresses that
// no wide load may use. Each format reads with the widest loads its block size
// allows (kAlign: the largest power of two up to 16 dividing the block size),
// given a matrix that starts on kAlign bytes (quant_alignment; the host checks
// it): q4_k and q5_k take 16-byte loads, q4_1 and q2_k 4-byte ones, and the
// formats of 2-byte (q4_0, q5_0, q8_0, q3_k, q6_k, iq4_nl) and 1-byte (mxfp4)
// alignment the aligned words around their bytes, funnel-shifted into place.
// Adjacent lanes take adjacent chunks; a lane's loads of one chunk are then
// spread over the whole stretch of row that its warp reads, so a warp-wide
// load touches several cache lines for 4 bytes a lane. The matrix-vector kernel
// therefore first copies that stretch to shared memory in 16-byte loads that
// adjacent lanes make at adjacent addresses, and reads the blocks there (Note
// [Staging weights in shared memory] in quant.cu), except for q4_k and q5_k,
// whose 16-byte loads already use every byte of the lines they touch.
//
// Note [Levels fit a signed byte]
// Every format's levels are integers in [-128, 127] once its constant shift is
// taken out (q4_0: q - 8; q5_0: q - 16; q3_k: q - 4; q6_k: q - 32; iq4: the
// table's values; mxfp4: its values doubled), so one layout serves the integer
// dot products (dp4a against 8-bit activations) and dequantization alike. The
// scale times a level is exact in f32 for every format (at most 24 significant
// bits: an f16 scale, a sub-scale of up to 7 bits and a level of up to 8), so a
// value rounds once, where the offset is added, as on the CPU.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device.h"

namespace switchyard::cuda::device::quant {

struct Chunk {
  // Element 4 i + b of the chunk is byte b of q[i], a signed level.
  int q[8];
  // Per group of 16 elements.
  float scale[2];
  float offset[2];
};

// --- loads ----------------------------------------------------------------------
// Plain loads through generic pointers: the matrix-vector kernel reads blocks
// staged in shared memory, the dequantizer straight from global memory.

// N little-endian words from p, which is kAlign-aligned: 16-byte loads where it
// allows, 4-byte ones from 4 bytes on; below that the aligned words around the
// bytes, shifted into place (a word is read past the last byte only when the
// bytes do not start on a word, so never a word the bytes do not touch).
template <int kAlign, int N>
__device__ __forceinline__ void load_words(const std::uint8_t* p, std::uint32_t (&w)[N]) {
  if constexpr (kAlign >= 16 && N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const uint4 v = reinterpret_cast<const uint4*>(p)[i];
      w[4 * i] = v.x;
      w[4 * i + 1] = v.y;
      w[4 * i + 2] = v.z;
      w[4 * i + 3] = v.w;
    }
  } else if constexpr (kAlign >= 4) {
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = reinterpret_cast<const std::uint32_t*>(p)[i];
  } else {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    const auto* base = reinterpret_cast<const std::uint32_t*>(address & ~std::uintptr_t{3});
    const unsigned shift = 8u * static_cast<unsigned>(address & 3u);
    std::uint32_t current = base[0];
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const std::uint32_t next = (i + 1 < N || shift != 0) ? base[i + 1] : 0u;
      w[i] = __funnelshift_r(current, next, shift);
      current = next;
    }
  }
}

// 32 bits from p, which is kAlign-aligned.
template <int kAlign>
__device__ __forceinline__ std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t w[1];
  load_words<kAlign, 1>(p, w);
  return w[0];
}

// 16 bits from p, which is kAlign-aligned.
template <int kAlign>
__device__ __forceinline__ std::uint32_t load_u16(const std::uint8_t* p) {
  if constexpr (kAlign >= 2) {
    return *reinterpret_cast<const unsigned short*>(p);
  } else {
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8);
  }
}

// An f16 stored little-endian at p (kAlign-aligned), as f32.
template <int kAlign>
__device__ __forceinline__ float load_half(const std::uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(load_u16<kAlign>(p))));
}

// --- bit manipulation on four bytes at a time ------------------------------------

__device__ __forceinline__ std::uint32_t low_nibbles(std::uint32_t w) { return w & 0x0f0f0f0fu; }
__device__ __forceinline__ std::uint32_t high_nibbles(std::uint32_t w) {
  return (w >> 4) & 0x0f0f0f0fu;
}
// Bit b of `bits` (b < 4) into bit 0 of byte b.
__device__ __forceinline__ std::uint32_t spread_bits(std::uint32_t bits) {
  return (bits & 1u) | ((bits & 2u) << 7) | ((bits & 4u) << 14) | ((bits & 8u) << 21);
}
// Each byte minus `bias` (its bytes all equal), as signed bytes; no byte wraps.
__device__ __forceinline__ std::uint32_t minus(std::uint32_t w, std::uint32_t bias) {
  return __vsub4(w, bias);
}
// Four table lookups: byte b of the result is entry (byte b of `index`, < 16) of
// the 16-byte table t (entries 4 i .. 4 i + 3 in t[i]).
__device__ __forceinline__ std::uint32_t lookup16(std::uint32_t index,
                                                  const std::uint32_t (&t)[4]) {
  // __byte_perm picks among 8 bytes by the low 3 bits of each selector nibble.
  const std::uint32_t selector =
      (index & 0x7u) | ((index >> 4) & 0x70u) | ((index >> 8) & 0x700u) | ((index >> 12) & 0x7000u);
  const std::uint32_t low = __byte_perm(t[0], t[1], selector);
  const std::uint32_t high = __byte_perm(t[2], t[3], selector);
  const std::uint32_t upper = ((index >> 3) & 0x01010101u) * 0xffu;
  return (low & ~upper) | (high & upper);
}
__device__ __forceinline__ constexpr std::uint32_t pack_bytes(int a, int b, int c, int d) {
  return static_cast<std::uint32_t>(a & 0xff) | (static_cast<std::uint32_t>(b & 0xff) << 8) |
         (static_cast<std::uint32_t>(c & 0xff) << 16) |
         (static_cast<std::uint32_t>(d & 0xff) << 24);
}
// Byte i (0..11) of three words.
__device__ __forceinline__ int byte_of(const std::uint32_t (&w)[3], int i) {
  const std::uint32_t word = i < 4 ? w[0] : (i < 8 ? w[1] : w[2]);
  return static_cast<int>((word >> (8 * (i & 3))) & 0xffu);
}

// The 16 levels of iq4_nl and iq4_xs, and mxfp4's E2M1 values doubled (bit 3 the
// sign): quant_blocks.h's kIQ4NLValues and kMXFP4Values.
__device__ __forceinline__ void iq4_table(std::uint32_t (&t)[4]) {
  t[0] = pack_bytes(-127, -104, -83, -65);
  t[1] = pack_bytes(-49, -35, -22, -10);
  t[2] = pack_bytes(1, 13, 25, 38);
  t[3] = pack_bytes(53, 69, 89, 113);
}
__device__ __forceinline__ void mxfp4_table(std::uint32_t (&t)[4]) {
  t[0] = pack_bytes(0, 1, 2, 3);
  t[1] = pack_bytes(4, 6, 8, 12);
  t[2] = pack_bytes(0, -1, -2, -3);
  t[3] = pack_bytes(-4, -6, -8, -12);
}

// The 6-bit scale and min of group j (0..7) of a q4_k / q5_k block from its 12
// scale bytes (quant_blocks.h's k4_scale_min).
__device__ __forceinline__ void k4_scale_min(int j, const std::uint32_t (&s)[3], int& scale,
                                             int& min) {
  if (j < 4) {
    scale = byte_of(s, j) & 63;
    min = byte_of(s, j + 4) & 63;
  } else {
    scale = (byte_of(s, j + 4) & 0xf) | ((byte_of(s, j - 4) >> 6) << 4);
    min = (byte_of(s, j + 4) >> 4) | ((byte_of(s, j) >> 6) << 4);
  }
}

// The signed scale of group j (0..15) of a q3_k block (quant_blocks.h's q3k_scale).
__device__ __forceinline__ int q3k_scale(int j, const std::uint32_t (&s)[3]) {
  const int low = j < 8 ? (byte_of(s, j) & 0xf) : (byte_of(s, j - 8) >> 4);
  const int high = (byte_of(s, 8 + (j & 3)) >> (2 * (j >> 2))) & 3;
  return (low | (high << 4)) - 32;
}

// An E8M0 exponent as the mxfp4 scale, halved (quant_blocks.h's e8m0_half).
__device__ __forceinline__ float e8m0_half(std::uint32_t e) {
  return __uint_as_float(e >= 2 ? (e - 1) << 23 : 0x00200000u << e);
}

__device__ __forceinline__ void same_scale(Chunk& c, float scale, float offset) {
  c.scale[0] = c.scale[1] = scale;
  c.offset[0] = c.offset[1] = offset;
}

// --- the formats -------------------------------------------------------------------
// Format<F>: kBlockBytes and kBlockElems (dtype.def), kAlign (Note [Reading blocks
// on the device]), kOffsets (whether any offset is nonzero), and
// unpack(block, chunk, out) for chunk 0 .. kBlockElems / 32 - 1.

template <QuantFormat F>
struct Format;

// Nibble-packed 32-element blocks (q4_0, q4_1, iq4_nl, mxfp4): element j < 16 is
// the low nibble of byte j, element j + 16 its high nibble. So word i's low
// nibbles are elements 4 i .. 4 i + 3 and its high nibbles elements 16 + 4 i ..
template <int kAlign>
__device__ __forceinline__ void nibble_halves(const std::uint8_t* qs, std::uint32_t (&lo)[4],
                                              std::uint32_t (&hi)[4]) {
  std::uint32_t w[4];
  load_words<kAlign, 4>(qs, w);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    lo[i] = low_nibbles(w[i]);
    hi[i] = high_nibbles(w[i]);
  }
}

template <>
struct Format<QuantFormat::kQ4_0> {  // d[2] qs[16]
  static constexpr int kBlockBytes = 18, kBlockElems = 32, kAlign = 2;
  static constexpr bool kOffsets = false;
  __device__ static void unpack(const std::uint8_t* b, int /*chunk*/, Chunk& c) {
    std::uint32_t lo[4], hi[4];
    nibble_halves<kAlign>(b + 2, lo, hi);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      c.q[i] = static_cast<int>(minus(lo[i], 0x08080808u));
      c.q[4 + i] = static_cast<int>(minus(hi[i], 0x08080808u));
    }
    same_scale(c, load_half<kAlign>(b), 0.0f);
  }
};

template <>
struct Format<QuantFormat::kQ4_1> {  // d[2] m[2] qs[16]
  static constexpr int kBlockBytes = 20, kBlockElems = 32, kAlign = 4;
  static constexpr bool kOffsets = true;
  __device__ static void unpack(const std::uint8_t* b, int /*chunk*/, Chunk& c) {
    std::uint32_t lo[4], hi[4];
    nibble_halves<kAlign>(b + 4, lo, hi);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      c.q[i] = static_cast<int>(lo[i]);
      c.q[4 + i] = static_cast<int>(hi[i]);
    }
    same_scale(c, load_half<kAlign>(b), load_half<2>(b + 2));
  }
};

// q5_0 / q5_1: the fifth bit of element j is bit j of the 32-bit qh.
template <int kAlign>
__device__ __forceinline__ void five_bit_levels(const std::uint8_t* qs, std::uint32_t qh,
                                                std::uint32_t (&levels)[8]) {
  std::uint32_t lo[4], hi[4];
  nibble_halves<kAlign>(qs, lo, hi);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    levels[i] = lo[i] | (spread_bits((qh >> (4 * i)) & 0xfu) << 4);
    levels[4 + i] = hi[i] | (spread_bits((qh >> (16 + 4 * i)) & 0xfu) << 4);
  }
}

template <>
struct Format<QuantFormat::kQ5_0> {  // d[2] qh[4] qs[16]
  static constexpr int kBlockBytes = 22, kBlockElems = 32, kAlign = 2;
  static constexpr bool kOffsets = false;
  __device__ static void unpack(const std::uint8_t* b, int /*chunk*/, Chunk& c) {
    std::uint32_t levels[8];
    five_bit_levels<kAlign>(b + 6, load_u32<kAlign>(b + 2), levels);
#pragma unroll
    for (int i = 0; i < 8; ++i) c.q[i] = static_cast<int>(minus(levels[i], 0x10101010u));
    same_scale(c, load_half<kAlign>(b), 0.0f);
  }
};

template <>
struct Format<QuantFormat::kQ5_1> {  // d[2] m[2] qh[4] qs[16]
  static constexpr int kBlockBytes = 24, kBlockElems = 32, kAlign = 8;
  static constexpr bool kOffsets = true;
  __device__ static void unpack(const std::uint8_t* b, int /*chunk*/, Chunk& c) {
    std::uint32_t levels[8];
    five_bit_levels<kAlign>(b + 8, load_u32<kAlign>(b + 4), levels);
#pragma unroll
    for (int i = 0; i < 8; ++i) c.q[i] = static_cast<int>(levels[i]);
    same_scale(c, load_half<kAlign>(b), load_half<2>(b + 2));
  }
};

template <>
struct Format<QuantFormat::kQ8_0> {  // d[2] qs[32]
  static constexpr int kBlockBytes = 34, kBlockElems = 32, kAlign = 2;
  static constexpr bool kOffsets = false;
  __device__ static void unpack(const std::uint8_t* b, int /*chunk*/, Chunk& c) {
    std::uint32_t w[8];
    load_words<kAlign, 8>(b + 2, w);
#pragma unroll
    for (int i = 0; i < 8; ++i) c.q[i] = static_cast<int>(w[i]);
    same_scale(c, load_half<kAlign>(b), 0.0f);
  }
};

// q2_k and q3_k: chunk c is half c / 4 of the block, whose 32 bytes of qs give
// element l of the chunk in byte l at bits 2 (c % 4).
template <int kAlign>
__device__ __forceinline__ void two_bit_levels(const std::uint8_t* qs, int chunk,
                                               std::uint32_t (&levels)[8]) {
  std::uint32_t w[8];
  load_words<kAlign, 8>(qs + 32 * (chunk >> 2), w);
  const int shift = 2 * (chunk & 3);
#pragma unroll
  for (int i = 0; i < 8; ++i) levels[i] = (w[i] >> shift) & 0x03030303u;
}

template <>
struct Format<QuantFormat::kQ2_K> {  // scales[16] qs[64] d[2] dmin[2]
  static constexpr int kBlockBytes = 84, kBlockElems = 256, kAlign = 4;
  static constexpr bool kOffsets = true;
  __device__ static void unpack(const std::uint8_t* b, int chunk, Chunk& c) {
    std::uint32_t levels[8];
    two_bit_levels<kAlign>(b + 16, chunk, levels);
#pragma unroll
    for (int i = 0; i < 8; ++i) c.q[i] = static_cast<int>(levels[i]);
    const std::uint32_t d_dmin = load_u32<kAlign>(b + 80);
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(d_dmin & 0xffffu)));
    const float dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(d_dmin >> 16)));
    const std::uint32_t scales = load_u16<2>(b + 2 * chunk);
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const std::uint32_t s = (scales >> (8 * g)) & 0xffu;
      c.scale[g] = d * static_cast<float>(s & 0xfu);
      c.offset[g] = -(dmin * static_cast<float>(s >> 4));
    }
  }
};

template <>
struct Format<QuantFormat::kQ3_K> {  // hmask[32] qs[64] scales[12] d[2]
  static constexpr int kBlockBytes = 110, kBlockElems = 256, kAlign = 2;
  static constexpr bool kOffsets = false;
  __device__ static void unpack(const std::uint8_t* b, int chunk, Chunk& c) {
    std::uint32_t levels[8], high[8];
    two_bit_levels<kAlign>(b + 32, chunk, levels);
    // The third bit of element l of chunk c: bit c of hmask[l]; clear means -4.
    load_words<kAlign, 8>(b, high);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t third = (high[i] >> chunk) & 0x01010101u;
      c.q[i] = static_cast<int>(minus(levels[i] | (third << 2), 0x04040404u));
    }
    std::uint32_t s[3];
    load_words<kAlign, 3>(b + 96, s);
    const float d = load_half<kAlign>(b + 108);
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      c.scale[g] = d * static_cast<float>(q3k_scale(2 * chunk + g, s));
      c.offset[g] = 0.0f;
    }
  }
};

// q4_k and q5_k: d, dmin and the 12 scale bytes in the first 16 bytes; chunk c
// takes the low (c even) or high nibbles of the 32 qs bytes at 32 (c / 2).
__device__ __forceinline__ void k4_header(const std::uint8_t* b, int chunk, Chunk& c) {
  const uint4 head = *reinterpret_cast<const uint4*>(b);
  const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(head.x & 0xffffu)));
  const float dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(head.x >> 16)));
  const std::uint32_t s[3] = {head.y, head.z, head.w};
  int scale = 0, min = 0;
  k4_scale_min(chunk, s, scale, min);
  same_scale(c, d * static_cast<float>(scale), -(dmin * static_cast<float>(min)));
}

template <>
struct Format<QuantFormat::kQ4_K> {  // d[2] dmin[2] scales[12] qs[128]
  static constexpr int kBlockBytes = 144, kBlockElems = 256, kAlign = 16;
  static constexpr bool kOffsets = true;
  __device__ static void unpack(const std::uint8_t* b, int chunk, Chunk& c) {
    std::uint32_t w[8];
    load_words<kAlign, 8>(b + 16 + 32 * (chunk >> 1), w);
    const int shift = 4 * (chunk & 1);
#pragma unroll
    for (int i = 0; i < 8; ++i) c.q[i] = static_cast<int>((w[i] >> shift) & 0x0f0f0f0fu);
    k4_header(b, chunk, c);
  }
};

template <>
struct Format<QuantFormat::kQ5_K> {  // d[2] dmin[2] scales[12] qh[32] qs[128]
  static constexpr int kBlockBytes = 176, kBlockElems = 256, kAlign = 16;
  static constexpr bool kOffsets = true;
  __device__ static void unpack(const std::uint8_t* b, int chunk, Chunk& c) {
    std::uint32_t w[8], high[8];
    load_words<kAlign, 8>(b + 48 + 32 * (chunk >> 1), w);
    load_words<kAlign, 8>(b + 16, high);
    const int shift = 4 * (chunk & 1);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t fifth = (high[i] >> chunk) & 0x01010101u;
      c.q[i] = static_cast<int>(((w[i] >> shift) & 0x0f0f0f0fu) | (fifth << 4));
    }
    k4_header(b, chunk, c);
  }
};

template <>
struct Format<QuantFormat::kQ6_K> {  // ql[128] qh[64] scales[16] d[2]
  static constexpr int kBlockBytes = 210, kBlockElems = 256, kAlign = 2;
  static constexpr bool kOffsets = false;
  __device__ static void unpack(const std::uint8_t* b, int chunk, Chunk& c) {
    // Half h = c / 4; quarter r = c % 4 of it takes ql[64 h + 32 (r % 2) + l]
    // (nibble r / 2) and bits 2 r of qh[32 h + l].
    const int h = chunk >> 2, r = chunk & 3;
    std::uint32_t low[8], high[8];
    load_words<kAlign, 8>(b + 64 * h + 32 * (r & 1), low);
    load_words<kAlign, 8>(b + 128 + 32 * h, high);
    const int nibble = 4 * (r >> 1);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t v =
          ((low[i] >> nibble) & 0x0f0f0f0fu) | (((high[i] >> (2 * r)) & 0x03030303u) << 4);
      c.q[i] = static_cast<int>(minus(v, 0x20202020u));
    }
    const float d = load_half<kAlign>(b + 208);
    // Groups 16 h .. of the block: scales[8 h + 2 r + g], signed bytes.
    const std::uint32_t scales = load_u16<kAlign>(b + 192 + 8 * h + 2 * r);
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const auto s = static_cast<signed char>((scales >> (8 * g)) & 0xffu);
      c.scale[g] = d * static_cast<float>(s);
      c.offset[g] = 0.0f;
    }
  }
};

template <int kAlign>
__device__ __forceinline__ void table_levels(const std::uint8_t* qs, const std::uint32_t (&t)[4],
                                             Chunk& c) {
  std::uint32_t lo[4], hi[4];
  nibble_halves<kAlign>(qs, lo, hi);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    c.q[i] = static_cast<int>(lookup16(lo[i], t));
    c.q[4 + i] = static_cast<int>(lookup16(hi[i], t));
  }
}

template <>
struct Format<QuantFormat::kIQ4_NL> {  // d[2] qs[16]
  static constexpr int kBlockBytes = 18, kBlockElems = 32, kAlign = 2;
  static constexpr bool kOffsets = false;
  __device__ static void unpack(const std::uint8_t* b, int /*chunk*/, Chunk& c) {
    std::uint32_t t[4];
    iq4_table(t);
    table_levels<kAlign>(b + 2, t, c);
    same_scale(c, load_half<kAlign>(b), 0.0f);
  }
};

template <>
struct Format<QuantFormat::kIQ4_XS> {  // d[2] scales_h[2] scales_l[4] qs[128]
  static constexpr int kBlockBytes = 136, kBlockElems = 256, kAlign = 8;
  static constexpr bool kOffsets = false;
  __device__ static void unpack(const std::uint8_t* b, int chunk, Chunk& c) {
    std::uint32_t t[4];
    iq4_table(t);
    table_levels<kAlign>(b + 8 + 16 * chunk, t, c);
    const uint2 head = *reinterpret_cast<const uint2*>(b);
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(head.x & 0xffffu)));
    const std::uint32_t low = (head.y >> (4 * chunk)) & 0xfu;  // scales_l[c / 2], nibble c % 2
    const std::uint32_t high = ((head.x >> 16) >> (2 * chunk)) & 3u;
    same_scale(c, d * static_cast<float>(static_cast<int>(low | (high << 4)) - 32), 0.0f);
  }
};

template <>
struct Format<QuantFormat::kMXFP4> {  // e qs[16]
  static constexpr int kBlockBytes = 17, kBlockElems = 32, kAlign = 1;
  static constexpr bool kOffsets = false;
  __device__ static void unpack(const std::uint8_t* b, int /*chunk*/, Chunk& c) {
    std::uint32_t t[4];
    mxfp4_table(t);
    table_levels<kAlign>(b + 1, t, c);
    same_scale(c, e8m0_half(b[0]), 0.0f);
  }
};

}  // namespace switchyard::cuda::device::quant
