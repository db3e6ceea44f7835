// The matvec kernels for M = 1, written once over simd_vec.h and compiled per
// instruction set by matvec_avx2.cpp and matvec_avx512.cpp: y[n] = x · w[n] with
// the weights streamed once at memory bandwidth. f16 weights are widened by the
// vector conversion (F16C / vcvtph2ps), bf16 weights by a shift; both are free next
// to the memory traffic.
//
// Four weight rows are processed together so each x vector load serves four rows.
// Every row is still summed in the same fixed order whether it is part of a group
// of four or not: two accumulators over steps of 2 kW elements, one kW step, a
// scalar tail, then vreduce_add of the two accumulators' sum plus the tail.
//
// Like every file over simd_vec.h this one keeps to its rules: internal linkage
// only, no standard-library templates (gemm.h, "Why the ISA files are kept small").
#include <cstdint>

#include "backends/cpu/gemm/gemm.h"
#include "backends/cpu/simd_vec.h"

namespace switchyard::cpu::SWITCHYARD_SIMD_NS {
namespace {

// Element p[0] as f32 (exact).
inline float load1(const float* p) { return *p; }
inline float load1(const F16* p) { return f16_to_f32(p->bits); }
inline float load1(const BF16* p) { return bf16_to_f32(p->bits); }

// y[r] = x · w[r] for r < R, each row k elements of storage type S.
template <int R, typename S>
void dot_rows(const float* x, const S* const* w, std::int64_t k, float* y) {
  VF acc0[R];
  VF acc1[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = vzero();
  std::int64_t i = 0;
  for (; i + 2 * kW <= k; i += 2 * kW) {
    const VF x0 = load(x + i);
    const VF x1 = load(x + i + kW);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      acc0[r] = vfma(x0, load(w[r] + i), acc0[r]);
      acc1[r] = vfma(x1, load(w[r] + i + kW), acc1[r]);
    }
  }
  if (i + kW <= k) {
    const VF x0 = load(x + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc0[r] = vfma(x0, load(w[r] + i), acc0[r]);
    i += kW;
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    float tail = 0.0f;
    for (std::int64_t j = i; j < k; ++j) tail += x[j] * load1(w[r] + j);
    y[r] = vreduce_add(vadd(acc0[r], acc1[r])) + tail;
  }
}

// A MatvecFn for weights of storage type S.
template <typename S>
void matvec(const float* x, const void* w_v, std::int64_t ldw, std::int64_t k, std::int64_t n0,
            std::int64_t n1, float* y) {
  const auto* w = static_cast<const S*>(w_v);
  std::int64_t n = n0;
  for (; n + 4 <= n1; n += 4) {
    const S* rows[4] = {w + n * ldw, w + (n + 1) * ldw, w + (n + 2) * ldw, w + (n + 3) * ldw};
    dot_rows<4, S>(x, rows, k, y + n);
  }
  for (; n < n1; ++n) {
    const S* rows[1] = {w + n * ldw};
    dot_rows<1, S>(x, rows, k, y + n);
  }
}

// The kernels by float_storage_index of the weights.
constexpr MatvecFn kByWeight[3] = {&matvec<float>, &matvec<F16>, &matvec<BF16>};

}  // namespace
}  // namespace switchyard::cpu::SWITCHYARD_SIMD_NS
