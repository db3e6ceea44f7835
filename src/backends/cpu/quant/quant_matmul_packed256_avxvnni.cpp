// The packed sibling's 256-bit tiles with AVX-VNNI's VEX vpdpbusd
// (quant_matmul_packed256_inl.h): CPUs with AVX2 and AVX-VNNI, without AVX-512.
#include <immintrin.h>

#include "backends/cpu/quant/quant_packed.h"

namespace switchyard::cpu {
namespace {

__m256i dpbusd256(__m256i acc, __m256i w, __m256i x) { return _mm256_dpbusd_avx_epi32(acc, w, x); }

}  // namespace
}  // namespace switchyard::cpu

#include "backends/cpu/quant/quant_matmul_packed256_inl.h"

namespace switchyard::cpu {

void packed_tiles256_avxvnni(PackedFormat f, const std::uint8_t* w, std::int64_t /*panel_bytes*/,
                             int /*panels*/, const std::uint8_t* x, std::int64_t x_stride, int rows,
                             std::int64_t k, PackedSpan span, float* out, std::int64_t n,
                             int last_panel_rows) {
  run_tiles256(f, w, x, x_stride, rows, k, span, out, n, last_panel_rows);
}

}  // namespace switchyard::cpu
