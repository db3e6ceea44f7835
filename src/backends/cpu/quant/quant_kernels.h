// CPU kernels on GGUF block-quantized operands: matmul with quantized weights
// (decode and prefill), get_rows from quantized tables, and casts from quantized
// types to f32 / f16 / bf16.
//
// Each kernel takes the weight / table dtype as a template argument, so every
// binding key has its own function (and a wrong operand dtype is refused), while
// the work is shared by one implementation per kernel family.
//
//   matmul_quant_ref   portable: dequantizes a weight row to f32 once, then one
//                      f32 dot product per activation row, in index order.
//   matmul_quant_avx2  AVX2 + FMA + F16C: quantizes each activation row once to
//                      the format's activation type (q8_0 or q8_k) and runs
//                      integer dot products (byte multiply-adds) per block,
//                      in register tiles (2 or 1 weight rows x 4 or 8
//                      activation rows for prefill).
//   matmul_quant_avx512 AVX-512 F/BW/VL + VNNI: the same activation quantization
//                      and precision, 64 levels per vpdpbusd / vpdpwssd, and
//                      register tiles (4 weight rows for decode, 4, 3 or 2 weight
//                      rows x 4 activation rows for prefill).
//   matmul_quant_amx   AMX-INT8: the AVX-512 sibling's activation quantization,
//                      tile products per weight group (quant_matmul_amx.h).
// The two integer-dot siblings share their skeleton (quant_matmul_simd.h): the
// checks, the activation rows' preparation, the walk of the tiles over the
// outputs; each ISA file provides, per weight format, only its tiles and its
// activation layout.
//
// All are deterministic at any thread count: work is split by weight (output) row
// and each output element is computed by one thread in a fixed order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "switchyard/kernel.h"

namespace switchyard::cpu {

// The validated operands of a quantized matmul: `rows` activation rows of `k`
// floats (all leading dimensions of a flattened), `n` weight rows of `row_bytes`.
struct QuantMatmulArgs {
  const float* a = nullptr;
  const std::byte* w = nullptr;
  float* out = nullptr;
  std::int64_t rows = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t row_bytes = 0;
};

// Checks a matmul call: a f32 [..., M, K] and out f32 [..., M, N] contiguous,
// w [N, K] of dtype `w` contiguous with K a whole number of blocks. Errors are
// kInvalidArgument naming the kernel (call.name).
Result<QuantMatmulArgs> check_quant_matmul(const KernelCall& call, DType w);

// The implementations, for the quantized dtype `w`.
Status matmul_quant_ref(const KernelCall& call, DType w);
Status get_rows_quant_ref(const KernelCall& call, DType table, DType out);
Status cast_quant_ref(const KernelCall& call, DType from, DType to);
// Requires AVX2, FMA and F16C (the caller registers it only when the CPU has them).
Status matmul_quant_avx2(const KernelCall& call, DType w);
// Requires AVX-512 F/BW/VL/DQ, AVX-512 VNNI and F16C; uses GFNI and AVX512_VBMI
// where cpu_features() has them. The second form chooses (each extra requires
// the CPU to have it), for tests that compare the paths.
struct Avx512QuantExtras {
  bool gfni = false;         // q2_k tiles
  bool avx512_vbmi = false;  // q5_0 / q5_1 tiles
};
Status matmul_quant_avx512(const KernelCall& call, DType w);
Status matmul_quant_avx512(const KernelCall& call, DType w, Avx512QuantExtras extras);
// Requires AVX-512 F/BW/VL/DQ, F16C and AMX-INT8 with the tile state granted
// (cpu_features().amx_int8): the same activation quantization and precision as
// matmul_quant_avx512, on the tile units (quant_matmul_amx.h). For prefill: it
// unpacks the weights once per call.
Status matmul_quant_amx(const KernelCall& call, DType w);
// Requires AVX-512 F/BW/VL/DQ and BF16, F16C, AMX-BF16 with the tile state
// granted (cpu_features().amx_bf16) and AMX-INT8 (its file holds the weights'
// unpacking, amx_unpack_rows): the weights' exact f32 values and the
// activations each rounded once to bf16, products accumulated in f32 on the tile
// units (quant_matmul_amx.h). For prefill: it unpacks the weights once per call.
Status matmul_quant_amx_bf16(const KernelCall& call, DType w);

// The activation format the integer dot product of `w` pairs with: q8_k for the
// 256-element formats, q8_0 for the 32-element ones. (q4_1 and q5_1 pair with q8_0
// too: their min term needs the activation block's sum, which the AVX2 dot takes
// exactly from the quantized values instead of q8_1's f16-rounded d * sum.)
DType activation_format(DType w);

template <DType W>
Status matmul_quant_ref_for(const KernelCall& call) {
  return matmul_quant_ref(call, W);
}
template <DType W>
Status matmul_quant_avx2_for(const KernelCall& call) {
  return matmul_quant_avx2(call, W);
}
template <DType W>
Status matmul_quant_avx512_for(const KernelCall& call) {
  return matmul_quant_avx512(call, W);
}
template <DType W>
Status matmul_quant_amx_for(const KernelCall& call) {
  return matmul_quant_amx(call, W);
}
template <DType W>
Status matmul_quant_amx_bf16_for(const KernelCall& call) {
  return matmul_quant_amx_bf16(call, W);
}
template <DType Table, DType Out>
Status get_rows_quant_ref_for(const KernelCall& call) {
  return get_rows_quant_ref(call, Table, Out);
}
template <DType From, DType To>
Status cast_quant_ref_for(const KernelCall& call) {
  return cast_quant_ref(call, From, To);
}

}  // namespace switchyard::cpu
