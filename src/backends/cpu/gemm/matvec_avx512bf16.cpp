// The bf16 x bf16 matvec with AVX512_BF16 (reached through matvec_kernels_avx512(),
// which gemm.cpp uses only when the CPU has the extension): vdpbf16ps multiplies
// bf16 pairs exactly and sums in f32, 32 elements per instruction. f32 activations
// are never rounded to bf16 for it (that would lose the f32 arithmetic the op
// contract promises); they take the widening kernels in matvec_avx512.cpp. Only
// this file and the AMX-BF16 one are compiled with -mavx512bf16, so no other
// AVX-512 kernel can pick up a BF16 instruction from the compiler on a CPU
// without it.

#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/avx512_diagnostics.h"
#include "backends/cpu/gemm/gemm.h"
#include "switchyard/half.h"

namespace switchyard::cpu {
namespace {

__m512bh load_bf16x32(const std::uint16_t* p) {
  return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
}

template <int R>
void dot_rows_bf16(const std::uint16_t* x, const std::uint16_t* const* w, std::int64_t k,
                   float* y) {
  __m512 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    const __m512bh xv = load_bf16x32(x + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm512_dpbf16_ps(acc[r], xv, load_bf16x32(w[r] + i));
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float tail = 0.0f;
    for (std::int64_t j = i; j < k; ++j) tail += bf16_to_f32(x[j]) * bf16_to_f32(w[r][j]);
    y[r] = _mm512_reduce_add_ps(acc[r]) + tail;
  }
}

}  // namespace

void matvec_bf16_bf16_avx512bf16(const std::uint16_t* x, const std::uint16_t* w, std::int64_t ldw,
                                 std::int64_t k, std::int64_t n0, std::int64_t n1, float* y) {
  std::int64_t n = n0;
  for (; n + 4 <= n1; n += 4) {
    const std::uint16_t* rows[4] = {w + n * ldw, w + (n + 1) * ldw, w + (n + 2) * ldw,
                                    w + (n + 3) * ldw};
    dot_rows_bf16<4>(x, rows, k, y + n);
  }
  for (; n < n1; ++n) {
    const std::uint16_t* rows[1] = {w + n * ldw};
    dot_rows_bf16<1>(x, rows, k, y + n);
  }
}

}  // namespace switchyard::cpu
