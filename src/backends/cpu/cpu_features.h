// The x86-64 instruction-set features of the running CPU, detected once. Kernels
// compiled for AVX2 or AVX-512 are registered only when the CPU (and the OS, for
// the wider register state) supports them.
//
// SWITCHYARD_CPU_DISABLE (read once) turns features off for testing the narrower
// siblings on a wide machine: a comma list of `avx_vnni`, `avx512`, `avx512_vnni`,
// `avx512_bf16`, `avx512_vbmi`, `gfni`, `amx`, `avx2`, `f16c` ("avx2" and
// "avx512" also disable everything wider).
//
// AMX needs more than CPUID: Linux hands a process the 8 KiB tile register state
// only on request (arch_prctl ARCH_REQ_XCOMP_PERM). detect() asks once; a refusal
// (an older kernel, a seccomp filter, a hypervisor that hides XTILEDATA) leaves
// amx_int8 false, so the AMX siblings are not registered and the AVX-512 ones run.
#pragma once

#include <string>

namespace switchyard::cpu {

struct CpuFeatures {
  bool avx2 = false;  // with FMA
  bool f16c = false;
  bool avx_vnni = false;  // with AVX2: the VEX-encoded 256-bit vpdpbusd (AVX-VNNI)
  bool avx512 = false;    // F, BW, VL and DQ together
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx512_vbmi = false;
  bool gfni = false;      // with AVX-512: the 512-bit Galois-field instructions
  bool amx_int8 = false;  // with AVX-512: AMX-TILE and AMX-INT8, tile state granted
  bool amx_bf16 = false;  // with AVX-512 BF16: AMX-TILE and AMX-BF16, tile state granted

  // "avx2 f16c avx_vnni avx512 avx512_vnni avx512_vbmi gfni amx_int8 amx_bf16".
  [[nodiscard]] std::string to_string() const;
};

[[nodiscard]] const CpuFeatures& cpu_features();

}  // namespace switchyard::cpu
