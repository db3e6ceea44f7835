// Shared argument checks for CPU kernels: a kernel refuses malformed calls with a
// Status instead of reading out of bounds.
#pragma once

#include <fmt/format.h>

#include "switchyard/kernel.h"

namespace switchyard::cpu {

// What a kernel's error messages call it: the registered name its call carries
// (KernelCall::name, set by the executor and the conformance harness from the
// entry), or "(unnamed kernel)" when a caller ran the function directly, without
// an entry. A kernel never formats its own name.
[[nodiscard]] inline std::string_view kernel_label(const KernelCall& call) {
  return call.name.empty() ? std::string_view("(unnamed kernel)") : call.name;
}

// The checks below take that label as `kernel`.

// The call has exactly `inputs` inputs and `outputs` outputs, with these dtypes.
inline Status check_arity(const KernelCall& call, std::size_t inputs, std::size_t outputs,
                          std::string_view kernel) {
  if (call.inputs.size() != inputs || call.outputs.size() != outputs) {
    return invalid_argument_error(
        fmt::format("{}: expected {} inputs and {} outputs, got {} and {}", kernel, inputs, outputs,
                    call.inputs.size(), call.outputs.size()));
  }
  return Status::ok();
}

inline Status check_same_shape(const TensorView& a, const TensorView& b, std::string_view kernel) {
  if (!(a.shape() == b.shape())) {
    return invalid_argument_error(fmt::format("{}: shape {} does not match {}", kernel,
                                              a.shape().to_string(), b.shape().to_string()));
  }
  return Status::ok();
}

inline Status check_dtype(const TensorView& t, DType expected, std::string_view kernel) {
  if (t.dtype() != expected) {
    return invalid_argument_error(
        fmt::format("{}: operand is {}, kernel takes {}", kernel, name(t.dtype()), name(expected)));
  }
  return Status::ok();
}

// Calls body(out_index, a_index, b_index) for every element of `out`, where the
// indices are element offsets (offset and strides applied) into each view. The
// views must have the rank and shape of `out` (broadcast dims with stride 0).
template <typename Body>
void for_each_element3(const TensorView& out, const TensorView& a, const TensorView& b,
                       std::int64_t begin_row, std::int64_t end_row, Body&& body) {
  const int rank = out.rank();
  const std::int64_t inner = out.shape().inner();
  const std::int64_t sa = rank ? a.stride(rank - 1) : 0;
  const std::int64_t sb = rank ? b.stride(rank - 1) : 0;
  const std::int64_t so = rank ? out.stride(rank - 1) : 0;
  for (std::int64_t row = begin_row; row < end_row; ++row) {
    // Decompose the row index over the outer dimensions.
    std::int64_t rem = row;
    std::int64_t ia = a.offset(), ib = b.offset(), io = out.offset();
    for (int d = rank - 2; d >= 0; --d) {
      const std::int64_t i = rem % out.dim(d);
      rem /= out.dim(d);
      ia += i * a.stride(d);
      ib += i * b.stride(d);
      io += i * out.stride(d);
    }
    for (std::int64_t j = 0; j < inner; ++j) body(io + j * so, ia + j * sa, ib + j * sb);
  }
}

}  // namespace switchyard::cpu
