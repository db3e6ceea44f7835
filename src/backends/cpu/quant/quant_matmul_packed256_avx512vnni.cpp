// The packed sibling's 256-bit tiles with AVX-512 VNNI's EVEX vpdpbusd on ymm
// registers (quant_matmul_packed256_inl.h): the same operation as AVX-VNNI's, on
// the machines that have AVX-512, where the 512-bit tiles usually rank first.
#include <immintrin.h>

#include "backends/cpu/quant/quant_packed.h"

namespace switchyard::cpu {
namespace {

__m256i dpbusd256(__m256i acc, __m256i w, __m256i x) { return _mm256_dpbusd_epi32(acc, w, x); }

}  // namespace
}  // namespace switchyard::cpu

#include "backends/cpu/quant/quant_matmul_packed256_inl.h"

namespace switchyard::cpu {

void packed_tiles256_avx512vnni(PackedFormat f, const std::uint8_t* w, std::int64_t /*panel_bytes*/,
                                int /*panels*/, const std::uint8_t* x, std::int64_t x_stride,
                                int rows, std::int64_t k, PackedSpan span, float* out,
                                std::int64_t n, int last_panel_rows) {
  run_tiles256(f, w, x, x_stride, rows, k, span, out, n, last_panel_rows);
}

}  // namespace switchyard::cpu
