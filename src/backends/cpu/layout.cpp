#include <algorithm>
#include <cstring>

#include "backends/cpu/tensor_kernels.h"

namespace switchyard::cpu {
namespace {

// Layout kernels move bits: an element is an unsigned integer of its size.
template <std::size_t kBytes>
using Bits = std::conditional_t<kBytes == 4, std::uint32_t, std::uint16_t>;

std::string layout_name(std::string_view op, DType t, int inputs = 0) {
  return inputs > 0 ? fmt::format("{}{}_{}__cpu_ref", op, inputs, name(t))
                    : fmt::format("{}_{}__cpu_ref", op, name(t));
}

Status check_layout_dtypes(const KernelCall& call, DType t, std::string_view kernel) {
  for (const TensorView& v : call.inputs) SWITCHYARD_RETURN_IF_ERROR(check_dtype(v, t, kernel));
  return check_dtype(call.outputs[0], t, kernel);
}

// Copies every element of `in` (any strides) to the contiguous `out` positions
// given by `out_offset(row)` + j * `out_inner_stride` for row-major rows of `in`.
template <typename E, typename OutOffset>
void scatter_rows(const TensorView& in, E* po, std::int64_t out_inner_stride,
                  const ExecContext& ctx, OutOffset out_offset) {
  const E* pi = static_cast<const E*>(in.data());
  const std::int64_t inner = in.shape().inner();
  const std::int64_t si = in.rank() ? in.stride(in.rank() - 1) : 0;
  const TensorView* const views[1] = {&in};
  ctx.parallel_for(in.numel() > 0 ? in.shape().outer() : 0, row_grain(inner),
                   [&](std::int64_t begin, std::int64_t end) {
                     std::int64_t off[1];
                     for (std::int64_t r = begin; r < end; ++r) {
                       row_offsets(in.shape(), views, r, off);
                       E* dst = po + out_offset(r);
                       const E* src = pi + off[0];
                       if (si == 1 && out_inner_stride == 1) {
                         std::memcpy(dst, src, static_cast<std::size_t>(inner) * sizeof(E));
                       } else {
                         for (std::int64_t j = 0; j < inner; ++j) {
                           dst[j * out_inner_stride] = src[j * si];
                         }
                       }
                     }
                   });
}

template <std::size_t kBytes, DType kDType>
Status copy_kernel_impl(const KernelCall& call) {
  using E = Bits<kBytes>;
  const std::string kName = layout_name("copy", kDType);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 1, 1, kName));
  SWITCHYARD_RETURN_IF_ERROR(check_layout_dtypes(call, kDType, kName));
  const TensorView& x = call.inputs[0];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(x, out, kName));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kName));
  if (x.is_contiguous()) {
    // One flat range split across the pool: a 1-D tensor is a single row, which
    // the row split below would give to one thread.
    constexpr std::int64_t kGrain = std::int64_t{1} << 15;
    const auto* src = x.first_as<E>();
    E* dst = out.first_as<E>();
    call.ctx.parallel_for(x.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
      std::memcpy(dst + begin, src + begin, static_cast<std::size_t>(end - begin) * sizeof(E));
    });
    return Status::ok();
  }
  const std::int64_t inner = out.shape().inner();
  scatter_rows<E>(x, out.first_as<E>(), 1, call.ctx, [&](std::int64_t r) { return r * inner; });
  return Status::ok();
}

template <std::size_t kBytes, DType kDType>
Status transpose_kernel_impl(const KernelCall& call) {
  using E = Bits<kBytes>;
  const std::string kName = layout_name("transpose", kDType);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 1, 1, kName));
  SWITCHYARD_RETURN_IF_ERROR(check_layout_dtypes(call, kDType, kName));
  const TensorView& x = call.inputs[0];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kName));
  const int rank = x.rank();
  bool shape_ok = rank >= 2 && out.rank() == rank;
  for (int i = 0; shape_ok && i < rank - 2; ++i) shape_ok = x.dim(i) == out.dim(i);
  shape_ok =
      shape_ok && out.dim(rank - 2) == x.dim(rank - 1) && out.dim(rank - 1) == x.dim(rank - 2);
  if (!shape_ok) {
    return invalid_argument_error(fmt::format("{}: {} -> {} is not [..., A, B] -> [..., B, A]",
                                              kName, x.shape().to_string(),
                                              out.shape().to_string()));
  }
  const std::int64_t a = x.dim(rank - 2);
  const std::int64_t b = x.dim(rank - 1);
  const std::int64_t sa = x.stride(rank - 2);
  const std::int64_t sb = x.stride(rank - 1);
  const std::int64_t batch = a * b > 0 ? x.numel() / (a * b) : 0;
  // Tiles of kTile x kTile keep both the reads and the writes within a few cache
  // lines per row; work is split by (matrix, tile row).
  constexpr std::int64_t kTile = 32;
  const std::int64_t tile_rows = (a + kTile - 1) / kTile;
  const E* px = static_cast<const E*>(x.data());
  E* po = out.first_as<E>();
  call.ctx.parallel_for(batch * tile_rows, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t m = task / tile_rows;
      const std::int64_t a0 = (task % tile_rows) * kTile;
      const std::int64_t a1 = std::min(a, a0 + kTile);
      // The offset of matrix m in x, over the batch dimensions.
      std::int64_t base = x.offset();
      std::int64_t rem = m;
      for (int d = rank - 3; d >= 0; --d) {
        base += (rem % x.dim(d)) * x.stride(d);
        rem /= x.dim(d);
      }
      E* om = po + m * a * b;
      // A tile goes through a local buffer: reading rows and writing rows keeps
      // every memory access contiguous, so power-of-two row pitches cannot make
      // the tile's lines fight over a few cache sets.
      E tile[kTile * kTile];
      for (std::int64_t b0 = 0; b0 < b; b0 += kTile) {
        const std::int64_t b1 = std::min(b, b0 + kTile);
        for (std::int64_t i = a0; i < a1; ++i) {
          for (std::int64_t j = b0; j < b1; ++j) {
            tile[(i - a0) * kTile + (j - b0)] = px[base + i * sa + j * sb];
          }
        }
        for (std::int64_t j = b0; j < b1; ++j) {
          for (std::int64_t i = a0; i < a1; ++i) om[j * a + i] = tile[(i - a0) * kTile + (j - b0)];
        }
      }
    }
  });
  return Status::ok();
}

template <std::size_t kBytes, DType kDType, int kInputs>
Status concat_kernel_impl(const KernelCall& call) {
  using E = Bits<kBytes>;
  const std::string kName = layout_name("concat", kDType, kInputs);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, kInputs, 1, kName));
  SWITCHYARD_RETURN_IF_ERROR(check_layout_dtypes(call, kDType, kName));
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kName));
  const int rank = out.rank();
  const int axis = call.params.axis < 0 ? call.params.axis + rank : call.params.axis;
  if (rank < 1 || axis < 0 || axis >= rank) {
    return invalid_argument_error(
        fmt::format("{}: axis {} is outside rank {}", kName, call.params.axis, rank));
  }
  std::int64_t total = 0;
  for (const TensorView& in : call.inputs) {
    bool ok = in.rank() == rank;
    for (int d = 0; ok && d < rank; ++d) ok = d == axis || in.dim(d) == out.dim(d);
    if (!ok) {
      return invalid_argument_error(fmt::format("{}: input {} does not fit output {} on axis {}",
                                                kName, in.shape().to_string(),
                                                out.shape().to_string(), axis));
    }
    total += in.dim(axis);
  }
  if (total != out.dim(axis)) {
    return invalid_argument_error(fmt::format(
        "{}: inputs add up to {} along axis {}, output has {}", kName, total, axis, out.dim(axis)));
  }
  const auto ostrides = contiguous_strides(out.shape());
  E* po = out.first_as<E>();
  std::int64_t start = 0;
  for (const TensorView& in : call.inputs) {
    const std::int64_t shift = start * ostrides[axis];
    scatter_rows<E>(in, po, ostrides[rank - 1], call.ctx, [&](std::int64_t r) {
      std::int64_t off = shift;
      for (int d = rank - 2; d >= 0; --d) {
        off += (r % in.dim(d)) * ostrides[d];
        r /= in.dim(d);
      }
      return off;
    });
    start += in.dim(axis);
  }
  return Status::ok();
}

template <int kInputs>
KernelFn concat_for(DType t) {
  switch (t) {
    case DType::kF32: return &concat_kernel_impl<4, DType::kF32, kInputs>;
    case DType::kI32: return &concat_kernel_impl<4, DType::kI32, kInputs>;
    case DType::kF16: return &concat_kernel_impl<2, DType::kF16, kInputs>;
    case DType::kBF16: return &concat_kernel_impl<2, DType::kBF16, kInputs>;
    default: return nullptr;
  }
}

}  // namespace

KernelFn copy_kernel(DType t) {
  switch (t) {
    case DType::kF32: return &copy_kernel_impl<4, DType::kF32>;
    case DType::kI32: return &copy_kernel_impl<4, DType::kI32>;
    case DType::kF16: return &copy_kernel_impl<2, DType::kF16>;
    case DType::kBF16: return &copy_kernel_impl<2, DType::kBF16>;
    default: return nullptr;
  }
}

KernelFn transpose_kernel(DType t) {
  switch (t) {
    case DType::kF32: return &transpose_kernel_impl<4, DType::kF32>;
    case DType::kI32: return &transpose_kernel_impl<4, DType::kI32>;
    case DType::kF16: return &transpose_kernel_impl<2, DType::kF16>;
    case DType::kBF16: return &transpose_kernel_impl<2, DType::kBF16>;
    default: return nullptr;
  }
}

KernelFn concat_kernel(DType t, int inputs) {
  switch (inputs) {
    case 2: return concat_for<2>(t);
    case 3: return concat_for<3>(t);
    case 4: return concat_for<4>(t);
    case 5: return concat_for<5>(t);
    case 6: return concat_for<6>(t);
    case 7: return concat_for<7>(t);
    default: return nullptr;
  }
}

}  // namespace switchyard::cpu
