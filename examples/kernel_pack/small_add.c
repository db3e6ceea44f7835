/* A kernel pack with one kernel: f32 addition for small tensors.
 *
 * The CPU backend's add kernels hand every call to the thread pool, which costs a
 * few hundred nanoseconds before the first element is added (its cost model says
 * 300 ns). For a tensor of a few hundred elements that fixed cost is most of the
 * call; a plain loop on the calling thread finishes first. For a large tensor the
 * pool's threads and SIMD win. The cost formulas below say exactly that, so the
 * planner routes small additions here and large ones to the built-in kernels
 * (docs/kernel-packs.md walks through this file). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "switchyard/kernel_pack.h"

static int64_t element_count(const sy_tensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; ++i) n *= t->shape[i];
  return n;
}

static int same_shape(const sy_tensor* a, const sy_tensor* b) {
  if (a->rank != b->rank) return 0;
  for (int32_t i = 0; i < a->rank; ++i) {
    if (a->shape[i] != b->shape[i]) return 0;
  }
  return 1;
}

/* Operands arrive contiguous: the kernel declares no SY_CAP_STRIDED_INPUT, so the
 * executor copies a strided input first, and it declares no broadcasting, so the
 * planner gives it equal shapes only. It checks what it relies on all the same. */
static int add_small_f32(const sy_kernel_call* call) {
  if (call->num_inputs != 2 || call->num_outputs != 1) {
    snprintf(call->error, call->error_size, "expects 2 inputs and 1 output, got %d and %d",
             (int)call->num_inputs, (int)call->num_outputs);
    return 1;
  }
  const sy_tensor* a = &call->inputs[0];
  const sy_tensor* b = &call->inputs[1];
  const sy_tensor* out = &call->outputs[0];
  if (!same_shape(a, out) || !same_shape(b, out)) {
    snprintf(call->error, call->error_size, "operands must have the output's shape");
    return 1;
  }
  const float* x = (const float*)a->data;
  const float* y = (const float*)b->data;
  float* z = (float*)out->data;
  const int64_t n = element_count(out);
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
  return 0;
}

SWITCHYARD_PACK_EXPORT uint32_t switchyard_pack_abi_version(void) {
  return SWITCHYARD_PACK_ABI_VERSION;
}

SWITCHYARD_PACK_EXPORT int switchyard_pack_register(const sy_pack_registrar* registrar) {
  sy_kernel_decl decl;
  memset(&decl, 0, sizeof decl);
  decl.name = "add_f32__cpu_pack_small";
  decl.op = "add";
  decl.dtypes = "f32,f32,f32";
  decl.backend = "cpu";
  decl.caps = 0;
  /* One f32 addition, rounded once: exact to the rounding of the result. */
  decl.precision.audit = SY_PRECISION_BOUNDED;
  decl.precision.bit_stable = 1;
  decl.precision.deterministic_across_threads = 1;
  decl.precision.max_ulp = 0.5;
  decl.precision.max_rel = -1;
  decl.precision.max_abs = -1;
  /* One thread streams at about half the rate of the whole machine, so its bytes
   * count twice; there is no pool to wake, so no fixed cost beyond the call's. */
  decl.cost_flops = "numel(out)";
  decl.cost_bytes = "2 * (bytes(a) + bytes(b) + bytes(out))";
  decl.cost_overhead_ns = "0";
  decl.revision = 1;
  decl.fn = &add_small_f32;
  decl.data = NULL;
  return registrar->add_kernel(registrar->state, &decl);
}
