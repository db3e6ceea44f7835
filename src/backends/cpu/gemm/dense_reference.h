// Portable reference kernels of the dense matmul family: matmul (f32, f32, f32)
// (matmul_f32_ref.cpp, the reference the other tables and tests build on) and the
// keys beyond it (dense_reference.cpp): f16/bf16 weights and outputs, linear and
// ffn_swiglu. Scalar f32 arithmetic in index order, bit-stable and deterministic at
// any thread count (one thread computes each output element).
#pragma once

#include "switchyard/dtype.h"
#include "switchyard/kernel.h"

namespace switchyard::cpu {

// matmul a [..., M, K] x b [N, K] (or [..., N, K] with a's batch dims) ->
// out [..., M, N], all f32: each output element is one f32 dot product in index
// order.
Status matmul_f32_ref(const KernelCall& call);

// matmul a [..., M, K] x w [N, K] or [..., N, K] -> out [..., M, N].
template <DType A, DType W, DType O>
Status matmul_ref(const KernelCall& call);
// linear x [..., K], w [N, K], bias [N] -> out [..., N]; x, bias, out f32.
template <DType W>
Status linear_ref(const KernelCall& call);
// ffn_swiglu x [..., D], gate [F, D], up [F, D], down [D, F] -> out; x, out f32.
template <DType W>
Status ffn_swiglu_ref(const KernelCall& call);

}  // namespace switchyard::cpu
