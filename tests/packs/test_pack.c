/* Test kernel packs: one source, one library per PACK_<FAULT> definition
 * (tests/packs/CMakeLists.txt). Each misbehaves in exactly one way, so a test
 * can say which refusal it expects. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/kernel_pack.h"

/* The one kernel function: out = a * b (elementwise, equal shapes, contiguous),
 * split over call->parallel_for. kernel_data must point at one of the markers,
 * so a call that lost its data fails loudly. */
static const int kMarker = 0x5eed;
static const int kSecondMarker = 0x5eee;

struct mul_job {
  const float* a;
  const float* b;
  float* out;
};

static void mul_range(void* data, int64_t begin, int64_t end) {
  const struct mul_job* job = (const struct mul_job*)data;
  for (int64_t i = begin; i < end; ++i) job->out[i] = job->a[i] * job->b[i];
}

static int mul_f32(const sy_kernel_call* call) {
  if (call->kernel_data != &kMarker && call->kernel_data != &kSecondMarker) {
    snprintf(call->error, call->error_size, "kernel_data was not passed through");
    return 1;
  }
#ifdef PACK_KERNEL_ERROR
  snprintf(call->error, call->error_size, "refused: this pack takes no calls");
  return 1;
#endif
  int64_t n = 1;
  for (int32_t i = 0; i < call->outputs[0].rank; ++i) n *= call->outputs[0].shape[i];
  struct mul_job job = {(const float*)call->inputs[0].data, (const float*)call->inputs[1].data,
                        (float*)call->outputs[0].data};
  call->parallel_for(call, n, 1024, &mul_range, &job);
  return 0;
}

static sy_kernel_decl mul_decl(const char* name) {
  sy_kernel_decl d;
  memset(&d, 0, sizeof d);
  d.name = name;
  d.op = "mul";
  d.dtypes = "f32,f32,f32";
  d.backend = "cpu";
  d.precision.audit = SY_PRECISION_BOUNDED;
  d.precision.bit_stable = 1;
  d.precision.deterministic_across_threads = 1;
  d.precision.max_ulp = 0.5;
  d.precision.max_rel = -1;
  d.precision.max_abs = -1;
  d.cost_flops = "numel(out)";
  d.cost_bytes = "1000 * bytes(out)";
  d.cost_overhead_ns = "100000";
  d.revision = 1;
  d.fn = &mul_f32;
  d.data = (void*)&kMarker;
  return d;
}

SWITCHYARD_PACK_EXPORT uint32_t switchyard_pack_abi_version(void) {
#ifdef PACK_WRONG_ABI
  return SWITCHYARD_PACK_ABI_VERSION + 41;
#else
  return SWITCHYARD_PACK_ABI_VERSION;
#endif
}

#ifndef PACK_NO_REGISTER
SWITCHYARD_PACK_EXPORT int switchyard_pack_register(const sy_pack_registrar* r) {
#ifdef PACK_CRASH
  raise(SIGSEGV);
#endif
#ifdef PACK_EXITS
  exit(3);
#endif
  sy_kernel_decl first = mul_decl("mul_f32__cpu_pack_first");
#ifdef PACK_CLAIM_DIFFERS
  first.precision.max_ulp = 4;
#endif
#ifdef PACK_NULL_FN
  first.fn = NULL;
#endif
#ifdef PACK_BUILTIN_NAME
  first.name = "mul_f32__cpu_ref";
#endif
#ifdef PACK_BAD_OP
  first.op = "no_such_op";
#endif
  if (r->add_kernel(r->state, &first) != 0) return 1;
#ifdef PACK_FAIL_MIDWAY
  r->fail(r->state, "out of scratch memory after one kernel");
  return 2;
#endif
#if defined(PACK_TWO_KERNELS) || defined(PACK_UNDECLARED)
  /* The same function at the same key: a second kernel because its data differs. */
  sy_kernel_decl second = mul_decl("mul_f32__cpu_pack_second");
  second.data = (void*)&kSecondMarker;
  second.caps = SY_CAP_TRADES_PRECISION; /* as a narrower-type kernel would say */
  if (r->add_kernel(r->state, &second) != 0) return 1;
#endif
  return 0;
}
#endif
