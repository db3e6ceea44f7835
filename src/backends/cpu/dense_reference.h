// Portable reference kernels of the dense matmul family for the keys beyond
// matmul (f32, f32, f32) (whose reference is matmul_f32_ref): f16/bf16 weights and
// outputs, linear and ffn_swiglu. Scalar f32 arithmetic in index order, bit-stable
// and deterministic at any thread count.
#pragma once

#include "switchyard/dtype.h"
#include "switchyard/kernel.h"

namespace switchyard::cpu {

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
