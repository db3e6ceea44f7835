// What every CUDA kernel function checks and converts before it launches:
// operands in device memory, device types and layouts, launch errors as Status.
#pragma once

#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "backends/cuda/cuda_stream.h"
#include "backends/cuda/device.h"
#include "switchyard/kernel.h"

namespace switchyard::cuda {

// The kernel's registered name for messages, as the CPU's kernel_label.
[[nodiscard]] inline std::string_view label(const KernelCall& call) {
  return call.name.empty() ? std::string_view("(unnamed cuda kernel)") : call.name;
}

// The device type of a dense dtype the kernels store, or nullopt.
[[nodiscard]] inline std::optional<device::Type> device_type(DType t) {
  switch (t) {
    case DType::kF32: return device::Type::kF32;
    case DType::kF16: return device::Type::kF16;
    case DType::kBF16: return device::Type::kBF16;
    case DType::kI32: return device::Type::kI32;
    default: return std::nullopt;
  }
}

// A view's layout for the device (its shape and element strides).
[[nodiscard]] inline device::Layout layout_of(const TensorView& t) {
  device::Layout l;
  l.rank = t.rank();
  for (int d = 0; d < t.rank(); ++d) {
    l.dims[d] = t.dim(d);
    l.strides[d] = t.stride(d);
  }
  l.contiguous = t.is_contiguous();
  return l;
}

// The call's arity, every operand in CUDA memory, and its stream.
[[nodiscard]] inline Result<cudaStream_t> prepare(const KernelCall& call, std::size_t inputs) {
  if (call.inputs.size() != inputs || call.outputs.size() != 1) {
    return invalid_argument_error(fmt::format("{}: expected {} inputs and 1 output, got {} and {}",
                                              label(call), inputs, call.inputs.size(),
                                              call.outputs.size()));
  }
  auto on_device = [&](const TensorView& t) -> Status {
    if (t.backend() != BackendId::kCuda && t.numel() > 0) {
      return invalid_argument_error(fmt::format("{}: an operand is {} memory, not cuda ({})",
                                                label(call), name(t.backend()), describe(t)));
    }
    return Status::ok();
  };
  for (const TensorView& t : call.inputs) SWITCHYARD_RETURN_IF_ERROR(on_device(t));
  SWITCHYARD_RETURN_IF_ERROR(on_device(call.outputs[0]));
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  return s->stream;
}

// get_rows' operands: table [R, C], i32 indices [N] and out [N, C], all
// contiguous (the dtypes of table and out are the kernel's to check).
[[nodiscard]] inline Status check_get_rows_layout(const KernelCall& call) {
  const TensorView &table = call.inputs[0], &idx = call.inputs[1], &out = call.outputs[0];
  for (const TensorView* t : {&table, &idx, &out}) {
    if (!t->is_contiguous()) {
      return invalid_argument_error(
          fmt::format("{}: operand {} must be contiguous", label(call), describe(*t)));
    }
  }
  if (idx.dtype() != DType::kI32 || table.rank() != 2 || idx.rank() != 1 || out.rank() != 2 ||
      out.dim(0) != idx.dim(0) || out.dim(1) != table.dim(1)) {
    return invalid_argument_error(
        fmt::format("{}: {} at {} {} -> {} is not [R, C] at i32 [N] -> [N, C]", label(call),
                    table.shape().to_string(), name(idx.dtype()), idx.shape().to_string(),
                    out.shape().to_string()));
  }
  return Status::ok();
}

// The launch's error, named by the kernel.
[[nodiscard]] inline Status launched(cudaError_t e, const KernelCall& call) {
  if (e == cudaSuccess) return Status::ok();
  return cuda_error(e, fmt::format("{}: launch", label(call)));
}

}  // namespace switchyard::cuda
