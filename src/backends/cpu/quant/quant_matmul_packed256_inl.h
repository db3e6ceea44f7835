// The 256-bit tiles of the packed GEMM sibling (quant_packed.h), for CPUs whose
// widest integer dot product is a 256-bit vpdpbusd: AVX-VNNI without AVX-512
// (quant_matmul_packed256_avxvnni.cpp, the VEX encoding), and AVX-512 VNNI
// machines, which have it at 256 bits too (quant_matmul_packed256_avx512vnni.cpp,
// the EVEX encoding: the same operation, so the same bits). The including file
// defines dpbusd256(acc, w, x) first and its entry calls run_tiles256. In an
// anonymous namespace: each file compiles its own copy with its own flags
// (quant_tile_inl.h says why).
//
// The layout is the 512-bit tiles' (a group of 64 bytes holds one dword per row
// of a 16-row panel), read as two 32-byte halves of eight rows. Per sub-block of
// 32 (16) elements that is 8 (4) groups of two 256-bit loads and two vpdpbusd
// per activation row, then per half and row the 512-bit tiles' conversion,
// multiply and FMA (a second FMA for the formats with offsets), in the same
// order: each output lane sees the same operations as there, so the two tile
// widths give the same bits.
//
// Note [Chains of the 256-bit tiles]
// vpdpbusd adds into its accumulator, so each accumulator is a chain of
// dependent instructions; with a latency of about five cycles and two issued per
// cycle, about ten chains keep the units busy. AVX2 has sixteen registers. A
// tile of one panel by three activation rows holding its f32 sums in registers
// (6 chains, 6 sums, 2 weight halves, 1 broadcast) ran at about half of the
// 256-bit peak on Zen 4. So a tile is one panel by up to four rows, with 8
// chains in registers and the f32 sums in a small L1-resident array, read and
// written once per sub-block.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/quant/quant_packed.h"
#include "backends/cpu/quant/quant_packed_act_inl.h"

namespace switchyard::cpu {
namespace {

// Lanes [0, valid) of eight set, as the mask of vmaskmovps.
__m256i first_lanes(int valid) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <int kSub, bool kAffine, int kRows>
void tile256(const std::uint8_t* w, const std::uint8_t* x, std::int64_t x_stride, std::int64_t k,
             PackedSpan span, float* out, std::int64_t n, int valid_rows) {
  constexpr std::int64_t kTile = std::int64_t{16} * kSub + (kAffine ? 128 : 64);
  const __m256i mask[2] = {first_lanes(valid_rows), first_lanes(valid_rows - 8)};
  ActRow act[kRows];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) act[r] = act_row(x + r * x_stride, k);
  // The f32 sums live in L1, not in registers: the registers go to the
  // vpdpbusd chains (Note [Chains of the 256-bit tiles]).
  alignas(32) float sums[kRows][16];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      _mm256_store_ps(sums[r] + 8 * h, span.accumulate
                                           ? _mm256_maskload_ps(out + r * n + 8 * h, mask[h])
                                           : _mm256_setzero_ps());
    }
  }
  const std::int64_t s_end = span.end / kSub;
  for (std::int64_t s = span.begin / kSub; s < s_end; ++s) {
    const std::uint8_t* t = w + s * kTile;
    __m256i dot[2][kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __m256i start = kAffine ? _mm256_setzero_si256() : _mm256_set1_epi32(act[r].sums[s]);
      dot[0][r] = start;
      dot[1][r] = start;
    }
#pragma GCC unroll 8
    for (int g = 0; g < kSub / 4; ++g) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + g * 64));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + g * 64 + 32));
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        std::int32_t four;
        std::memcpy(&four, act[r].levels + s * kSub + 4 * g, sizeof four);
        const __m256i xv = _mm256_set1_epi32(four);
        dot[0][r] = dpbusd256(dot[0][r], w0, xv);
        dot[1][r] = dpbusd256(dot[1][r], w1, xv);
      }
    }
    const auto* scales = reinterpret_cast<const float*>(t + 16 * kSub);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256 d = _mm256_loadu_ps(scales + 8 * h);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(act[r].scales[s * kSub / 32]));
        __m256 acc =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[h][r]), dd, _mm256_load_ps(sums[r] + 8 * h));
        if constexpr (kAffine) {
          float sum;
          std::memcpy(&sum, act[r].sums + s, sizeof sum);
          acc = _mm256_fmadd_ps(_mm256_loadu_ps(scales + 16 + 8 * h), _mm256_set1_ps(sum), acc);
        }
        _mm256_store_ps(sums[r] + 8 * h, acc);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      _mm256_maskstore_ps(out + r * n + 8 * h, mask[h], _mm256_load_ps(sums[r] + 8 * h));
    }
  }
}

template <int kSub, bool kAffine>
void tiles256_for_rows(const std::uint8_t* w, const std::uint8_t* x, std::int64_t x_stride,
                       int rows, std::int64_t k, PackedSpan span, float* out, std::int64_t n,
                       int valid_rows) {
  switch (rows) {
    case 1: return tile256<kSub, kAffine, 1>(w, x, x_stride, k, span, out, n, valid_rows);
    case 2: return tile256<kSub, kAffine, 2>(w, x, x_stride, k, span, out, n, valid_rows);
    case 3: return tile256<kSub, kAffine, 3>(w, x, x_stride, k, span, out, n, valid_rows);
    default: return tile256<kSub, kAffine, 4>(w, x, x_stride, k, span, out, n, valid_rows);
  }
}

void run_tiles256(PackedFormat f, const std::uint8_t* w, const std::uint8_t* x,
                  std::int64_t x_stride, int rows, std::int64_t k, PackedSpan span, float* out,
                  std::int64_t n, int valid_rows) {
  const auto run = [&]<int kSub, bool kAffine>() {
    tiles256_for_rows<kSub, kAffine>(w, x, x_stride, rows, k, span, out, n, valid_rows);
  };
  if (f.sub == 16) {
    f.affine ? run.operator()<16, true>() : run.operator()<16, false>();
  } else {
    f.affine ? run.operator()<32, true>() : run.operator()<32, false>();
  }
}

}  // namespace
}  // namespace switchyard::cpu
