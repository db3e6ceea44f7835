// Portable reference kernels of the CPU backend: simple, bit-stable, and
// deterministic at any thread count (each output element is computed by one thread
// in a fixed order). They are registered last at every key, after the fast siblings.
#pragma once

#include "switchyard/kernel.h"

namespace switchyard::cpu {

Status add_f32_ref(const KernelCall& call);
Status mul_f32_ref(const KernelCall& call);
Status matmul_f32_ref(const KernelCall& call);

// Casts between the 16- and 32-bit float types.
Status cast_f32_f16_ref(const KernelCall& call);
Status cast_f16_f32_ref(const KernelCall& call);
Status cast_f32_bf16_ref(const KernelCall& call);
Status cast_bf16_f32_ref(const KernelCall& call);
Status cast_f16_bf16_ref(const KernelCall& call);
Status cast_bf16_f16_ref(const KernelCall& call);

}  // namespace switchyard::cpu
