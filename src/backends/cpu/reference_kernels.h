// Portable reference kernels of the CPU backend: simple, bit-stable, and
// deterministic at any thread count (each output element is computed by one thread
// in a fixed order). They are registered last at every key, after the fast siblings.
// The elementwise, norm, softmax, reduction, layout, rope, get_rows and attention
// kernels live in their family files (elementwise.h, rowwise.h, tensor_kernels.h).
#pragma once

#include "switchyard/kernel.h"

namespace switchyard::cpu {

Status matmul_f32_ref(const KernelCall& call);

}  // namespace switchyard::cpu
