// The x86-64 instruction-set features of the running CPU, detected once. Kernels
// compiled for AVX2 or AVX-512 are registered only when the CPU (and the OS, for
// the wider register state) supports them.
//
// SWITCHYARD_CPU_DISABLE (read once) turns features off for testing the narrower
// siblings on a wide machine: a comma list of `avx512`, `avx512_vnni`,
// `avx512_bf16`, `avx512_vbmi`, `gfni`, `avx2`, `f16c` ("avx2" also disables
// everything wider).
#pragma once

#include <string>

namespace switchyard::cpu {

struct CpuFeatures {
  bool avx2 = false;  // with FMA
  bool f16c = false;
  bool avx512 = false;  // F, BW, VL and DQ together
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx512_vbmi = false;
  bool gfni = false;  // with AVX-512: the 512-bit Galois-field instructions

  // "avx2 f16c avx512 avx512_vnni avx512_vbmi gfni".
  [[nodiscard]] std::string to_string() const;
};

[[nodiscard]] const CpuFeatures& cpu_features();

}  // namespace switchyard::cpu
