/* A kernel pack with one kernel: GELU with the exact (erf) formula, in f32.
 *
 * The CPU backend has one gelu_erf kernel, a portable reference that evaluates
 * 0.5 x erfc(-x / sqrt 2) in double precision through the C library: correct to
 * the last bit of f32 and slow. This pack trades a few bits of accuracy for speed.
 * It evaluates erfc with the rational approximation of Abramowitz and Stegun
 * (formula 7.1.26, absolute error at most 1.5e-7) in f32, so its claim is weaker:
 * a relative error of 1e-6, or an absolute one of 5e-7 where the result is near
 * zero. The planner routes a gelu_erf to it when the node's precision floor
 * allows that claim, and to the reference when the floor asks for more
 * (docs/kernel-packs.md walks through this file). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "switchyard/kernel_pack.h"

/* erfc(z) for z >= 0, Abramowitz and Stegun 7.1.26. */
static float erfc_nonnegative(float z) {
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  const float poly =
      t * (0.254829592f +
           t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  return poly * expf(-z * z);
}

/* 0.5 x (1 + erf(x / sqrt 2)). For x < 0 that is 0.5 x erfc(|x| / sqrt 2), for
 * x >= 0 it is x - 0.5 x erfc(x / sqrt 2): neither form cancels. */
static float gelu_erf(float x) {
  const float q = erfc_nonnegative(fabsf(x) * 0.70710678f);
  return x < 0.0f ? 0.5f * x * q : x - 0.5f * x * q;
}

struct job {
  const float* in;
  float* out;
};

static void gelu_range(void* data, int64_t begin, int64_t end) {
  const struct job* j = (const struct job*)data;
  for (int64_t i = begin; i < end; ++i) j->out[i] = gelu_erf(j->in[i]);
}

/* Operands arrive contiguous (no SY_CAP_STRIDED_INPUT), with the output's shape. */
static int gelu_erf_f32(const sy_kernel_call* call) {
  if (call->num_inputs != 1 || call->num_outputs != 1) {
    snprintf(call->error, call->error_size, "expects 1 input and 1 output, got %d and %d",
             (int)call->num_inputs, (int)call->num_outputs);
    return 1;
  }
  int64_t n = 1;
  for (int32_t i = 0; i < call->outputs[0].rank; ++i) n *= call->outputs[0].shape[i];
  struct job j = {(const float*)call->inputs[0].data, (float*)call->outputs[0].data};
  /* Large tensors go to Switchyard's thread pool, 16K elements at least per chunk. */
  call->parallel_for(call, n, 16384, &gelu_range, &j);
  return 0;
}

SWITCHYARD_PACK_EXPORT uint32_t switchyard_pack_abi_version(void) {
  return SWITCHYARD_PACK_ABI_VERSION;
}

SWITCHYARD_PACK_EXPORT int switchyard_pack_register(const sy_pack_registrar* registrar) {
  sy_kernel_decl decl;
  memset(&decl, 0, sizeof decl);
  decl.name = "gelu_erf_f32__cpu_pack_fast";
  decl.op = "gelu_erf";
  decl.dtypes = "f32,f32";
  decl.backend = "cpu";
  decl.caps = 0;
  decl.precision.audit = SY_PRECISION_BOUNDED;
  decl.precision.bit_stable = 1;
  decl.precision.deterministic_across_threads = 1;
  decl.precision.max_ulp = -1;
  decl.precision.max_rel = 1e-6;
  decl.precision.max_abs = 5e-7;
  /* About 20 f32 operations per element and one expf, which costs some 60 more:
   * 80 flops, where the CPU backend counts 200 for an element of its double
   * reference (measured: 5.7 against 15 ns an element on one core). Each element
   * read and written once; the pool's fixed cost when it fans out. */
  decl.cost_flops = "80 * numel(out)";
  decl.cost_bytes = "bytes(a) + bytes(out)";
  decl.cost_overhead_ns = "300";
  decl.revision = 1;
  decl.fn = &gelu_erf_f32;
  decl.data = NULL;
  return registrar->add_kernel(registrar->state, &decl);
}
