// Activation-row quantizers for the integer-dot matmul siblings: the bytes of
// quant::quantize_row for q8_0 and q8_k, computed with vector instructions.
#pragma once

#include <cstdint>

namespace switchyard::cpu {

// Quantizes k floats (a whole number of blocks) at x to q8_0 / q8_k blocks at dst,
// byte for byte as quant::quantize_row does for finite input. Non-finite input
// gives unspecified bytes (the matmul siblings overwrite those rows' outputs).
// Require AVX2 and F16C.
void quantize_row_q8_0_avx2(const float* x, void* dst, std::int64_t k);
void quantize_row_q8_k_avx2(const float* x, void* dst, std::int64_t k);

}  // namespace switchyard::cpu
