// cuda's collective kernels and the NCCL groups they run in (collective.cpp).
#pragma once

#include <memory>
#include <vector>

#include "switchyard/collective.h"
#include "switchyard/kernel.h"
#include "switchyard/op.h"

namespace switchyard::cuda {

// all_reduce, all_gather or reduce_scatter over contiguous f32, f16 or bf16 device
// operands: through NCCL when ExecContext::comm is a rank of
// create_nccl_communicators' group (even a group of one), a device copy for one
// rank without a group. Null for another op.
[[nodiscard]] KernelFn collective_kernel(OpKind op);

// One NCCL communicator per rank, rank r on device r (ncclCommInitAll), for one
// process that drives every GPU of the group. kUnavailable when the machine has
// fewer GPUs than ranks (or none); kUnimplemented in a build without NCCL.
[[nodiscard]] Result<std::vector<std::unique_ptr<Communicator>>> create_nccl_communicators(
    int ranks);

}  // namespace switchyard::cuda
