// The layout siblings' tile transposes and short copies, compiled for AVX2 (see
// layout_simd.h). Like the other instruction-set files, nothing here calls inline
// code of another header: this file's copy of it would be compiled for AVX2 and
// could be picked by the linker for the whole program.
//
// Note [Transpose tiles]
// ~~~~~~~~~~~~~~~~~~~~~~
// 4-byte elements go through 8x8 tiles, as two 8x4 halves (four output rows
// each). Each register is loaded from two rows, four columns each (rows k and
// k + 4, through a 128-bit insert from memory), so the lane-crossing step of the
// transpose is done by the loads and two 4x4 in-lane transposes (unpack, then
// shuffle) finish it: 16 shuffles per 64 elements instead of the 24 of a
// transpose that permutes lanes.
//
// 2-byte elements go through 16x8 tiles (16 rows of 8 columns): register k holds
// row k in its low lane and row k + 8 in its high lane, three in-lane unpack
// stages (16, 32, 64 bits) transpose both 8x8 halves at once, and each result
// register is one whole output row of 16 elements: 24 shuffles per 128 elements.
// Rows left over (fewer than 16) take an 8x8 tile in 128-bit registers, then a
// scalar loop, as do columns left over.
//
// The tile functions hand their output rows back in registers, for the two ways
// of storing them (ordinary stores, streamed lines); they are forced inline and
// their register loops unrolled so that those rows never go through memory.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/layout/layout_simd.h"

namespace switchyard::cpu::avx2 {
namespace {

// A panel reads 128 or 256 rows side by side, more streams than the hardware
// prefetchers follow: each row's lines are requested this many bytes ahead.
constexpr std::int64_t kPrefetchBytes = 512;

// Output rows are many pages apart and each column step writes a few lines into
// each of eight of them: no hardware prefetcher sees a stream there, so the lines
// of the step kAheadColumns on are requested before they are written.
constexpr std::int64_t kAheadColumns = 32;

// Requests `bytes` bytes of each of the eight output rows from d on.
inline void prefetch_rows8(const void* d, std::int64_t pitch_bytes, std::int64_t bytes) {
  const auto* p = static_cast<const char*>(d);
  for (int k = 0; k < 8; ++k) {
    for (std::int64_t off = 0; off < bytes; off += 64) {
      _mm_prefetch(p + k * pitch_bytes + off, _MM_HINT_T0);
    }
  }
}

inline __m256 load_rows(const float* lo, const float* hi) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo)), _mm_loadu_ps(hi), 1);
}

// 4-byte elements travel as float bit patterns: loads, shuffles and stores of
// floats never change bits. o[k] is output row k: column k of the 8 rows by 4
// columns at s (the 4x4 transposes of both lanes, rows k and k + 4 loaded into
// one register).
[[gnu::always_inline]] inline void tile8x4_4(const float* s, std::int64_t sp, __m256* o) {
  const __m256 r0 = load_rows(s, s + 4 * sp);
  const __m256 r1 = load_rows(s + sp, s + 5 * sp);
  const __m256 r2 = load_rows(s + 2 * sp, s + 6 * sp);
  const __m256 r3 = load_rows(s + 3 * sp, s + 7 * sp);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1);
  const __m256 t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3);
  const __m256 t3 = _mm256_unpackhi_ps(r2, r3);
  o[0] = _mm256_shuffle_ps(t0, t2, 0x44);
  o[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
  o[2] = _mm256_shuffle_ps(t1, t3, 0x44);
  o[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}

void transpose4(const void* src, std::int64_t sp, void* dst, std::int64_t dp, std::int64_t rows,
                std::int64_t cols) {
  const auto* s = static_cast<const float*>(src);
  auto* d = static_cast<float*>(dst);
  // Edges are copied as integers: a scalar float move must not be trusted with
  // every bit pattern.
  const auto* su = static_cast<const std::uint32_t*>(src);
  auto* du = static_cast<std::uint32_t*>(dst);
  const std::int64_t rows8 = rows & ~std::int64_t{7};
  const std::int64_t cols8 = cols & ~std::int64_t{7};
  for (std::int64_t j = 0; j < cols8; j += 8) {
    if ((j & 15) == 0 && j + kPrefetchBytes / 4 < cols) {
      for (std::int64_t i = 0; i < rows; ++i) {
        _mm_prefetch(reinterpret_cast<const char*>(s + i * sp + j + kPrefetchBytes / 4),
                     _MM_HINT_T0);
      }
    }
    if (j + kAheadColumns + 8 <= cols)
      prefetch_rows8(d + (j + kAheadColumns) * dp, dp * 4, rows * 4);
    for (std::int64_t i = 0; i < rows8; i += 8) {
#pragma GCC unroll 8
      for (std::int64_t h = 0; h < 8; h += 4) {
        __m256 o[4];
        tile8x4_4(s + i * sp + j + h, sp, o);
#pragma GCC unroll 8
        for (int k = 0; k < 4; ++k) _mm256_storeu_ps(d + (j + h + k) * dp + i, o[k]);
      }
    }
    for (std::int64_t i = rows8; i < rows; ++i) {
      for (std::int64_t k = j; k < j + 8; ++k) du[k * dp + i] = su[i * sp + k];
    }
  }
  for (std::int64_t k = cols8; k < cols; ++k) {
    for (std::int64_t i = 0; i < rows; ++i) du[k * dp + i] = su[i * sp + k];
  }
}

inline __m256i load_rows16(const std::uint16_t* lo, const std::uint16_t* hi) {
  return _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)), 1);
}

inline void store16(std::uint16_t* d, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), v);
}
inline void store8(std::uint16_t* d, __m128i v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d), v);
}
inline __m128i load8(const std::uint16_t* s) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
}

// o[k] is output row k: column k of the 16x8 tile at s, 16 elements.
[[gnu::always_inline]] inline void tile16x8_2(const std::uint16_t* s, std::int64_t sp, __m256i* o) {
  __m256i r[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) r[k] = load_rows16(s + k * sp, s + (k + 8) * sp);
  const __m256i t0 = _mm256_unpacklo_epi16(r[0], r[1]);
  const __m256i t1 = _mm256_unpackhi_epi16(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi16(r[2], r[3]);
  const __m256i t3 = _mm256_unpackhi_epi16(r[2], r[3]);
  const __m256i t4 = _mm256_unpacklo_epi16(r[4], r[5]);
  const __m256i t5 = _mm256_unpackhi_epi16(r[4], r[5]);
  const __m256i t6 = _mm256_unpacklo_epi16(r[6], r[7]);
  const __m256i t7 = _mm256_unpackhi_epi16(r[6], r[7]);
  const __m256i u0 = _mm256_unpacklo_epi32(t0, t2);
  const __m256i u1 = _mm256_unpackhi_epi32(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi32(t1, t3);
  const __m256i u3 = _mm256_unpackhi_epi32(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi32(t4, t6);
  const __m256i u5 = _mm256_unpackhi_epi32(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi32(t5, t7);
  const __m256i u7 = _mm256_unpackhi_epi32(t5, t7);
  o[0] = _mm256_unpacklo_epi64(u0, u4);
  o[1] = _mm256_unpackhi_epi64(u0, u4);
  o[2] = _mm256_unpacklo_epi64(u1, u5);
  o[3] = _mm256_unpackhi_epi64(u1, u5);
  o[4] = _mm256_unpacklo_epi64(u2, u6);
  o[5] = _mm256_unpackhi_epi64(u2, u6);
  o[6] = _mm256_unpacklo_epi64(u3, u7);
  o[7] = _mm256_unpackhi_epi64(u3, u7);
}

// The same three stages on one 8x8 tile in 128-bit registers.
void tile8x8_2(const std::uint16_t* s, std::int64_t sp, std::uint16_t* d, std::int64_t dp) {
  __m128i r[8];
  for (int k = 0; k < 8; ++k) r[k] = load8(s + k * sp);
  const __m128i t0 = _mm_unpacklo_epi16(r[0], r[1]);
  const __m128i t1 = _mm_unpackhi_epi16(r[0], r[1]);
  const __m128i t2 = _mm_unpacklo_epi16(r[2], r[3]);
  const __m128i t3 = _mm_unpackhi_epi16(r[2], r[3]);
  const __m128i t4 = _mm_unpacklo_epi16(r[4], r[5]);
  const __m128i t5 = _mm_unpackhi_epi16(r[4], r[5]);
  const __m128i t6 = _mm_unpacklo_epi16(r[6], r[7]);
  const __m128i t7 = _mm_unpackhi_epi16(r[6], r[7]);
  const __m128i u0 = _mm_unpacklo_epi32(t0, t2);
  const __m128i u1 = _mm_unpackhi_epi32(t0, t2);
  const __m128i u2 = _mm_unpacklo_epi32(t1, t3);
  const __m128i u3 = _mm_unpackhi_epi32(t1, t3);
  const __m128i u4 = _mm_unpacklo_epi32(t4, t6);
  const __m128i u5 = _mm_unpackhi_epi32(t4, t6);
  const __m128i u6 = _mm_unpacklo_epi32(t5, t7);
  const __m128i u7 = _mm_unpackhi_epi32(t5, t7);
  store8(d, _mm_unpacklo_epi64(u0, u4));
  store8(d + dp, _mm_unpackhi_epi64(u0, u4));
  store8(d + 2 * dp, _mm_unpacklo_epi64(u1, u5));
  store8(d + 3 * dp, _mm_unpackhi_epi64(u1, u5));
  store8(d + 4 * dp, _mm_unpacklo_epi64(u2, u6));
  store8(d + 5 * dp, _mm_unpackhi_epi64(u2, u6));
  store8(d + 6 * dp, _mm_unpacklo_epi64(u3, u7));
  store8(d + 7 * dp, _mm_unpackhi_epi64(u3, u7));
}

void transpose2(const void* src, std::int64_t sp, void* dst, std::int64_t dp, std::int64_t rows,
                std::int64_t cols) {
  const auto* s = static_cast<const std::uint16_t*>(src);
  auto* d = static_cast<std::uint16_t*>(dst);
  const std::int64_t rows16 = rows & ~std::int64_t{15};
  const std::int64_t rows8 = rows & ~std::int64_t{7};
  const std::int64_t cols8 = cols & ~std::int64_t{7};
  for (std::int64_t j = 0; j < cols8; j += 8) {
    if ((j & 31) == 0 && j + kPrefetchBytes / 2 < cols) {
      for (std::int64_t i = 0; i < rows; ++i) {
        _mm_prefetch(reinterpret_cast<const char*>(s + i * sp + j + kPrefetchBytes / 2),
                     _MM_HINT_T0);
      }
    }
    if (j + kAheadColumns + 8 <= cols)
      prefetch_rows8(d + (j + kAheadColumns) * dp, dp * 2, rows * 2);
    for (std::int64_t i = 0; i < rows16; i += 16) {
      __m256i o[8];
      tile16x8_2(s + i * sp + j, sp, o);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) store16(d + (j + k) * dp + i, o[k]);
    }
    if (rows8 > rows16) tile8x8_2(s + rows16 * sp + j, sp, d + j * dp + rows16, dp);
    for (std::int64_t i = rows8; i < rows; ++i) {
      for (std::int64_t k = j; k < j + 8; ++k) d[k * dp + i] = s[i * sp + k];
    }
  }
  for (std::int64_t k = cols8; k < cols; ++k) {
    for (std::int64_t i = 0; i < rows; ++i) d[k * dp + i] = s[i * sp + k];
  }
}

// Note [Streamed transposes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// For outputs far larger than the caches (layout.cpp, Note [Transpose panels]).
// A call covers a block of whole output rows (the caller's `cols`, 1 KiB of each
// input row) and walks its input rows in tiles one output line deep: 16 rows of
// 4-byte elements, 32 of 2-byte ones. Each column step of eight writes one whole
// 64-byte line of each of eight output rows (Note [Transpose tiles]: the 8x4
// halves of two 8x8 tiles, or two 16x8 tiles) with non-temporal stores, a line's
// two halves back to back: the line is complete in the write-combining buffer
// and goes to memory without the read for ownership that an ordinary store of a
// missing line costs. The output rows of a block are written front to back, so
// each stays on one page for 4 KiB of writes; the input is read in runs of 1 KiB
// per row, too short for the hardware prefetchers, so the next tile's runs are
// requested in software while this tile is transposed.
//
// The caller guarantees whole lines: `dst` and the output pitch are multiples of
// 64 bytes and `rows` a multiple of the tile depth. Columns left over (fewer than
// eight) are moved by scalar code; the closing fence orders the streamed lines
// before whatever the caller does next (a thread pool's completion signal).
//
// Each stream_lines transposes the tile one line deep and eight columns wide at s
// into eight whole output lines at d.
[[gnu::always_inline]] inline void stream_lines(const std::uint32_t* s, std::int64_t sp,
                                                std::uint32_t* d, std::int64_t dp) {
  const auto* sf = reinterpret_cast<const float*>(s);
  auto* df = reinterpret_cast<float*>(d);
#pragma GCC unroll 8
  for (std::int64_t h = 0; h < 8; h += 4) {
    __m256 lo[4], hi[4];
    tile8x4_4(sf + h, sp, lo);
    tile8x4_4(sf + 8 * sp + h, sp, hi);
#pragma GCC unroll 8
    for (int k = 0; k < 4; ++k) {
      _mm256_stream_ps(df + (h + k) * dp, lo[k]);
      _mm256_stream_ps(df + (h + k) * dp + 8, hi[k]);
    }
  }
}

[[gnu::always_inline]] inline void stream_lines(const std::uint16_t* s, std::int64_t sp,
                                                std::uint16_t* d, std::int64_t dp) {
  __m256i lo[8], hi[8];
  tile16x8_2(s, sp, lo);
  tile16x8_2(s + 16 * sp, sp, hi);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    auto* line = reinterpret_cast<__m256i*>(d + k * dp);
    _mm256_stream_si256(line, lo[k]);
    _mm256_stream_si256(line + 1, hi[k]);
  }
}

template <typename E>
void transpose_streamed(const void* src, std::int64_t sp, void* dst, std::int64_t dp,
                        std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kDepth = 64 / sizeof(E);
  const auto* s = static_cast<const E*>(src);
  auto* d = static_cast<E*>(dst);
  const std::int64_t cols8 = cols & ~std::int64_t{7};
  const std::int64_t run_bytes = cols * static_cast<std::int64_t>(sizeof(E));
  for (std::int64_t i0 = 0; i0 < rows; i0 += kDepth) {
    if (i0 + kDepth < rows && run_bytes > 0) {
      for (std::int64_t i = i0 + kDepth; i < i0 + 2 * kDepth; ++i) {
        const char* run = reinterpret_cast<const char*>(s + i * sp);
        for (std::int64_t off = 0; off < run_bytes; off += 64) _mm_prefetch(run + off, _MM_HINT_T0);
        _mm_prefetch(run + run_bytes - 1, _MM_HINT_T0);  // a run not starting on a line
      }
    }
    for (std::int64_t j = 0; j < cols8; j += 8) {
      stream_lines(s + i0 * sp + j, sp, d + j * dp + i0, dp);
    }
  }
  for (std::int64_t k = cols8; k < cols; ++k) {
    for (std::int64_t i = 0; i < rows; ++i) d[k * dp + i] = s[i * sp + k];
  }
  _mm_sfence();
}

// Short copies (concat runs of a few rows' worth) in at most four moves, the last
// overlapping the first where the size is not a power of two; long ones through
// memcpy.
void copy_bytes(void* dst, const void* src, std::size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (n >= 256) {
    std::memcpy(d, s, n);
  } else if (n >= 32) {
    const __m256i tail = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + n - 32));
    for (std::size_t i = 0; i + 32 < n; i += 32) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + n - 32), tail);
  } else if (n >= 16) {
    const __m128i head = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i tail = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + n - 16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d), head);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + n - 16), tail);
  } else if (n >= 8) {
    std::uint64_t head, tail;
    std::memcpy(&head, s, 8);
    std::memcpy(&tail, s + n - 8, 8);
    std::memcpy(d, &head, 8);
    std::memcpy(d + n - 8, &tail, 8);
  } else if (n >= 4) {
    std::uint32_t head, tail;
    std::memcpy(&head, s, 4);
    std::memcpy(&tail, s + n - 4, 4);
    std::memcpy(d, &head, 4);
    std::memcpy(d + n - 4, &tail, 4);
  } else if (n >= 2) {
    std::uint16_t head, tail;
    std::memcpy(&head, s, 2);
    std::memcpy(&tail, s + n - 2, 2);
    std::memcpy(d, &head, 2);
    std::memcpy(d + n - 2, &tail, 2);
  } else if (n == 1) {
    d[0] = s[0];
  }
}

// Panels: 128 rows of 4-byte elements, 256 of 2-byte ones: 512 bytes of each
// output row per column step. Measured on a 4096 x 4096 transpose (one thread),
// 16 / 32 / 64 / 128-row panels of f32 took 1.7 / 1.35 / 1.1 / 1.0 times the
// time of 128 rows; 256 rows gained nothing more. Streamed blocks: 1 KiB of
// each input row (256 or 512 columns); on the same transpose, 512-byte runs took
// about 1.1 times as long. Wider registers did not pay there: 16x16 AVX-512
// tiles with 64-byte streamed stores were slower than these.
constexpr LayoutSimd kLayoutTable{.transpose_panel4 = 128,
                                  .transpose_panel2 = 256,
                                  .transpose4 = &transpose4,
                                  .transpose2 = &transpose2,
                                  .stream_run_bytes = 1024,
                                  .transpose4_stream = &transpose_streamed<std::uint32_t>,
                                  .transpose2_stream = &transpose_streamed<std::uint16_t>,
                                  .copy = &copy_bytes};

}  // namespace
}  // namespace switchyard::cpu::avx2

namespace switchyard::cpu {

const LayoutSimd& layout_avx2() { return avx2::kLayoutTable; }

}  // namespace switchyard::cpu
