/* The C ABI of a kernel pack: a shared library that brings kernels into the
 * binding table from outside Switchyard.
 *
 * A pack exports two functions (SWITCHYARD_PACK_EXPORT):
 *
 *   uint32_t switchyard_pack_abi_version(void);
 *       returns SWITCHYARD_PACK_ABI_VERSION as the pack was compiled against it.
 *       A loader of another version refuses the pack before calling anything else.
 *
 *   int switchyard_pack_register(const sy_pack_registrar* registrar);
 *       declares the pack's kernels, one registrar->add_kernel call each, and
 *       returns 0; any other value refuses the whole pack. Before returning
 *       nonzero it may explain why through registrar->fail.
 *
 * Beside the library lies its manifest: the same path with the extension
 * replaced by ".json" (libfast.so -> libfast.json). It declares the pack's name
 * and every kernel's key, claims and cost; the loader refuses a pack whose
 * registrations and manifest disagree (docs/kernel-packs.md gives the format).
 *
 * Nothing of a pack enters the table unless all of it does: a refused
 * declaration, a manifest mismatch, a registration that fails or crashes leaves
 * the table as it was. Registration runs once per load, first in a child process
 * where a crash is reported instead of taking the caller down, then in the
 * caller.
 *
 * Only C types cross this boundary. Strings are NUL-terminated UTF-8 and are
 * copied by the loader before add_kernel returns. Every struct is passed by
 * pointer and owned by the caller of the function that receives it.
 *
 * Kernels
 *   A kernel receives its operands in binding-key order (inputs, then outputs),
 *   already on the key's backend, and returns 0 on success. On failure it writes
 *   a message into call->error (at most call->error_size bytes, NUL included)
 *   and returns nonzero; it never longjmps, throws or exits. Unless the kernel
 *   declares SY_CAP_STRIDED_INPUT, every input is contiguous. Outputs are
 *   always contiguous and preallocated.
 */
#ifndef SWITCHYARD_KERNEL_PACK_H_
#define SWITCHYARD_KERNEL_PACK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a struct below or the meaning of a field changes. */
#define SWITCHYARD_PACK_ABI_VERSION 1u

#if defined(_WIN32)
#define SWITCHYARD_PACK_EXPORT __declspec(dllexport)
#else
#define SWITCHYARD_PACK_EXPORT __attribute__((visibility("default")))
#endif

#define SY_MAX_RANK 8

/* One operand. `dtype` is the dtype's name as the binding key spells it ("f32",
 * "q4_k"); `strides` count elements (blocks' elements for a quantized dtype);
 * `data` points at the first element. */
typedef struct sy_tensor {
  void* data;
  const char* dtype;
  int32_t rank;
  int64_t shape[SY_MAX_RANK];
  int64_t strides[SY_MAX_RANK];
} sy_tensor;

/* The op's parameters (switchyard/kernel.h, OpParams, says which op reads which). */
typedef struct sy_op_params {
  float scale;
  float eps;
  int32_t axis;
  int32_t causal;    /* 0 or 1 */
  int32_t rope_neox; /* 0: adjacent pairs, 1: the two halves */
  float rope_base;
  int32_t rope_dims;
  int64_t query_offset;
} sy_op_params;

/* Runs body(body_data, begin, end) over chunks of [0, n) of at least `grain`
 * items, possibly on several threads; returns when every chunk has run. */
typedef void (*sy_range_fn)(void* body_data, int64_t begin, int64_t end);

typedef struct sy_kernel_call {
  const sy_tensor* inputs;
  int32_t num_inputs;
  const sy_tensor* outputs;
  int32_t num_outputs;
  const sy_op_params* params;
  /* The registered name of the kernel being called. */
  const char* name;
  /* What the kernel was declared with (sy_kernel_decl.data). */
  void* kernel_data;
  /* The backend's stream (a cudaStream_t for "cuda"); null on the CPU. */
  void* stream;
  /* The threads parallel_for shares work across (>= 1). */
  int32_t num_threads;
  void (*parallel_for)(const struct sy_kernel_call* call, int64_t n, int64_t grain,
                       sy_range_fn body, void* body_data);
  /* Where a failing kernel explains itself. */
  char* error;
  size_t error_size;
  /* The loader's own state for parallel_for; the kernel leaves it alone. */
  void* runner;
} sy_kernel_call;

typedef int (*sy_kernel_fn)(const sy_kernel_call* call);

/* Capability flags (switchyard/binding_table.h, KernelCaps). */
#define SY_CAP_STRIDED_INPUT 1u
#define SY_CAP_BROADCAST_INPUT 2u
#define SY_CAP_IN_PLACE 4u
/* Computes in a narrower type than its dtypes to be faster; chosen only where a
   plan admits precision trades (Note [Precision trades]). */
#define SY_CAP_TRADES_PRECISION 8u

/* A precision claim (switchyard/precision.h). A bound below zero is unset. */
#define SY_PRECISION_BOUNDED 1
#define SY_PRECISION_NO_BOUND 2
typedef struct sy_precision {
  int32_t audit; /* SY_PRECISION_BOUNDED or SY_PRECISION_NO_BOUND */
  int32_t bit_stable;
  int32_t deterministic_across_threads;
  double max_ulp;
  double max_rel;
  double max_abs;
} sy_precision;

/* One kernel. Cost formulas use the cost-expression language of
 * switchyard/cost.h (CostExpr); a null overhead formula means "0". */
typedef struct sy_kernel_decl {
  const char* name;    /* unique in the table, see kernel_name() */
  const char* op;      /* an op of op.def ("add") or a runtime-fused recipe's name */
  const char* dtypes;  /* operand dtypes in key order, comma separated: "f32,f32,f32" */
  const char* backend; /* "cpu", "cuda", ... */
  uint32_t caps;       /* SY_CAP_* */
  sy_precision precision;
  const char* cost_flops;
  const char* cost_bytes;
  const char* cost_overhead_ns;
  uint32_t revision; /* bump when the kernel's numerics change */
  sy_kernel_fn fn;
  void* data; /* handed back as sy_kernel_call.kernel_data */
} sy_kernel_decl;

typedef struct sy_pack_registrar {
  uint32_t abi_version; /* the loader's SWITCHYARD_PACK_ABI_VERSION */
  void* state;          /* the loader's; pass it back unchanged */
  /* Declares one kernel; 0 when accepted, nonzero (and the pack is refused)
   * when the declaration is malformed. */
  int (*add_kernel)(void* state, const sy_kernel_decl* decl);
  /* Records why registration is about to fail. */
  void (*fail)(void* state, const char* message);
} sy_pack_registrar;

typedef uint32_t (*sy_pack_abi_version_fn)(void);
typedef int (*sy_pack_register_fn)(const sy_pack_registrar* registrar);

#ifdef __cplusplus
}
#endif

#endif /* SWITCHYARD_KERNEL_PACK_H_ */
