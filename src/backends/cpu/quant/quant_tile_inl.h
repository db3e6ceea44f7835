// Inline helpers every instruction-set file of the integer-dot quantized matmul
// uses (quant_matmul_*_avx2.cpp, quant_matmul_*_avx512vnni.cpp).
//
// Everything here sits in an anonymous namespace on purpose: each ISA file gets its
// own private copy, compiled with its own flags, so the linker can never substitute
// a copy built for a wider ISA into a narrower file (gemm.h says more). Include only
// from ISA files.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace switchyard::cpu {
namespace {

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Note [Decode prefetch]
// A decode step (one activation row) reads every weight byte once, from DRAM for
// a real model. The hardware prefetchers alone left the AVX-512 tiles at about
// half of the measured DRAM read bandwidth: the cores, busy unpacking, keep too
// few lines in flight. The decode tiles therefore ask, for each of their rows,
// for the bytes of the row after it in memory at the offset they are reading
// now: the row that the tile's stream of rows reads next (Note [Decode streams]
// in quant_matmul_simd.cpp), spread evenly over the loop instead of in bursts.
// (The AVX2 decode tiles do the same.)
// Prefetches never fault, so running past the last row is harmless. Prefill
// tiles reuse each weight row across activation rows from L2 and do not
// prefetch.
template <bool kAhead>
inline void prefetch_ahead(const std::uint8_t* p, std::int64_t bytes) {
  if constexpr (kAhead) {
    for (std::int64_t o = 0; o < bytes; o += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
    }
  }
}

}  // namespace
}  // namespace switchyard::cpu
