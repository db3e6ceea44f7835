// The dot-product peaks of one core, per instruction set: independent chains of
// multiply-adds on register- or tile-resident operands, with no memory traffic,
// timed for `iterations` rounds. Each returns multiply-adds per second. The
// quantized GEMM benchmarks state their rates against these (docs/benchmarks.md,
// table 6). Call one only where cpu_features() has its instruction set (which,
// for AMX, includes the kernel's grant of the tile state).
#pragma once

#include <cstdint>

namespace switchyard::bench {

// vpmaddubsw, vpmaddwd and vpaddd on ymm registers (the AVX2 kernels' sequence):
// 32 byte multiply-adds per three instructions.
double dot_peak_avx2(std::int64_t iterations);
// vpdpbusd on zmm registers: 64 byte multiply-adds per instruction.
double dot_peak_avx512vnni(std::int64_t iterations);
// vpdpbusd on ymm registers, 32 byte multiply-adds per instruction: the EVEX form
// (AVX-512 VNNI) and the VEX form (AVX-VNNI), the 256-bit packed tiles' peak.
double dot_peak_avx512vnni_256(std::int64_t iterations);
double dot_peak_avxvnni(std::int64_t iterations);
// tdpbssd on 16 x 64-byte tiles: 16 * 16 * 64 byte multiply-adds per instruction.
double dot_peak_amx_int8(std::int64_t iterations);
// tdpbf16ps on 16 x 32-bf16 tiles: 16 * 16 * 32 bf16 multiply-adds per instruction.
double dot_peak_amx_bf16(std::int64_t iterations);

}  // namespace switchyard::bench
