// The CUDA kernel functions other than cuBLASLt's: the checks of each KernelCall
// and the launch of its device kernel (Note [Thin .cu files] in device.h).
#include "backends/cuda/kernels.h"

#include <array>
#include <utility>

#include "backends/cuda/kernel_checks.h"

namespace switchyard::cuda {
namespace {

Status check_same_shape(const KernelCall& call, const TensorView& a, const TensorView& b) {
  if (!(a.shape() == b.shape())) {
    return invalid_argument_error(fmt::format("{}: shape {} does not match {}", label(call),
                                              a.shape().to_string(), b.shape().to_string()));
  }
  return Status::ok();
}

Status check_contiguous(const KernelCall& call, const TensorView& t) {
  if (!t.is_contiguous()) {
    return invalid_argument_error(
        fmt::format("{}: operand {} must be contiguous", label(call), describe(t)));
  }
  return Status::ok();
}

// The float storage type every operand shares (the elementwise, row and rope
// kernels keep one dtype), or kInvalidArgument.
Result<device::Type> float_type(const KernelCall& call, std::span<const TensorView> views) {
  const DType t = call.outputs[0].dtype();
  std::optional<device::Type> type = device_type(t);
  if (!type || *type == device::Type::kI32) {
    return invalid_argument_error(
        fmt::format("{}: output is {}, kernel takes f32, f16 or bf16", label(call), name(t)));
  }
  for (const TensorView& v : views) {
    if (v.dtype() != t) {
      return invalid_argument_error(
          fmt::format("{}: operand is {}, output is {}", label(call), name(v.dtype()), name(t)));
    }
  }
  return *type;
}

template <OpKind kOp>
constexpr device::BinaryOp binary_op() {
  if constexpr (kOp == OpKind::kAdd) {
    return device::BinaryOp::kAdd;
  } else if constexpr (kOp == OpKind::kSub) {
    return device::BinaryOp::kSub;
  } else if constexpr (kOp == OpKind::kMul) {
    return device::BinaryOp::kMul;
  } else {
    static_assert(kOp == OpKind::kDiv, "a binary op of op.def without a device op");
    return device::BinaryOp::kDiv;
  }
}

template <OpKind kOp>
Status binary_impl(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 2));
  const TensorView &a = call.inputs[0], &b = call.inputs[1], &out = call.outputs[0];
  SWITCHYARD_ASSIGN_OR_RETURN(device::Type type, float_type(call, call.inputs));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(call, a, out));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(call, b, out));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, out));
  return launched(device::binary(binary_op<kOp>(), type, a.first(), layout_of(a), b.first(),
                                 layout_of(b), out.first(), out.numel(), stream),
                  call);
}

template <OpKind kOp>
constexpr device::UnaryOp unary_op() {
  using U = device::UnaryOp;
  if constexpr (kOp == OpKind::kNeg)
    return U::kNeg;
  else if constexpr (kOp == OpKind::kExp)
    return U::kExp;
  else if constexpr (kOp == OpKind::kSilu)
    return U::kSilu;
  else if constexpr (kOp == OpKind::kGelu)
    return U::kGelu;
  else if constexpr (kOp == OpKind::kGeluErf)
    return U::kGeluErf;
  else if constexpr (kOp == OpKind::kGeluQuick)
    return U::kGeluQuick;
  else if constexpr (kOp == OpKind::kRelu)
    return U::kRelu;
  else if constexpr (kOp == OpKind::kSqrt)
    return U::kSqrt;
  else if constexpr (kOp == OpKind::kRsqrt)
    return U::kRsqrt;
  else if constexpr (kOp == OpKind::kSigmoid)
    return U::kSigmoid;
  else if constexpr (kOp == OpKind::kTanh)
    return U::kTanh;
  else {
    static_assert(kOp == OpKind::kScale, "a unary op of op.def without a device op");
    return U::kScale;
  }
}

template <OpKind kOp>
Status unary_impl(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 1));
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  SWITCHYARD_ASSIGN_OR_RETURN(device::Type type, float_type(call, call.inputs));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(call, x, out));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, out));
  return launched(device::unary(unary_op<kOp>(), type, x.first(), layout_of(x), out.first(),
                                out.numel(), call.params.scale, stream),
                  call);
}

template <OpKind kOp>
Status norm_impl(const KernelCall& call) {
  const std::size_t inputs = call.inputs.size();
  const std::size_t most = kOp == OpKind::kRmsNorm ? 2 : 3;
  if (inputs < 1 || inputs > most) {
    return invalid_argument_error(
        fmt::format("{}: expected 1 to {} inputs, got {}", label(call), most, inputs));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, inputs));
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  SWITCHYARD_ASSIGN_OR_RETURN(device::Type type, float_type(call, call.inputs));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(call, x, out));
  for (const TensorView& t : call.inputs) SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, t));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, out));
  if (x.rank() < 1) {
    return invalid_argument_error(fmt::format("{}: x must have rank >= 1", label(call)));
  }
  const std::int64_t d = x.dim(x.rank() - 1);
  for (std::size_t i = 1; i < inputs; ++i) {
    const TensorView& p = call.inputs[i];
    if (p.rank() != 1 || p.dim(0) != d) {
      return invalid_argument_error(fmt::format("{}: {} must have shape [{}], got {}", label(call),
                                                i == 1 ? "w" : "b", d, p.shape().to_string()));
    }
  }
  const std::int64_t rows = d > 0 ? x.numel() / d : 0;
  const void* w = inputs > 1 ? call.inputs[1].first() : nullptr;
  const void* b = inputs > 2 ? call.inputs[2].first() : nullptr;
  if constexpr (kOp == OpKind::kRmsNorm) {
    return launched(
        device::rms_norm(type, x.first(), w, out.first(), rows, d, call.params.eps, stream), call);
  } else {
    static_assert(kOp == OpKind::kLayerNorm, "a norm op of op.def without a device kernel");
    return launched(
        device::layer_norm(type, x.first(), w, b, out.first(), rows, d, call.params.eps, stream),
        call);
  }
}

template <OpKind kOp>
Status reduce_impl(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 1));
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  SWITCHYARD_ASSIGN_OR_RETURN(device::Type type, float_type(call, call.inputs));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, x));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, out));
  bool ok = x.rank() >= 1 && out.rank() == x.rank() && out.dim(out.rank() - 1) == 1;
  for (int d = 0; ok && d + 1 < x.rank(); ++d) ok = x.dim(d) == out.dim(d);
  if (!ok) {
    return invalid_argument_error(fmt::format("{}: output {} is not {} with the last dim 1",
                                              label(call), out.shape().to_string(),
                                              x.shape().to_string()));
  }
  const std::int64_t d = x.dim(x.rank() - 1);
  const std::int64_t rows = out.numel();
  device::ReduceOp op = device::ReduceOp::kSum;
  if constexpr (kOp == OpKind::kMean) {
    op = device::ReduceOp::kMean;
  } else if constexpr (kOp == OpKind::kMax) {
    op = device::ReduceOp::kMax;
  } else {
    static_assert(kOp == OpKind::kSum, "a reduce op of op.def without a device op");
  }
  return launched(device::reduce(op, type, x.first(), out.first(), rows, d, stream), call);
}

// A function per op of a family, indexed by its place in the family.
template <template <OpKind> typename Impl, OpFamily kFamily, std::size_t... I>
constexpr auto family_table(std::index_sequence<I...>) {
  return std::array<KernelFn, sizeof...(I)>{&Impl<kOpsOfFamily<kFamily>[I]>::call...};
}
template <OpKind kOp>
struct BinaryImpl {
  static Status call(const KernelCall& c) { return binary_impl<kOp>(c); }
};
template <OpKind kOp>
struct UnaryImpl {
  static Status call(const KernelCall& c) { return unary_impl<kOp>(c); }
};
template <OpKind kOp>
struct NormImpl {
  static Status call(const KernelCall& c) { return norm_impl<kOp>(c); }
};
template <OpKind kOp>
struct ReduceImpl {
  static Status call(const KernelCall& c) { return reduce_impl<kOp>(c); }
};
template <template <OpKind> typename Impl, OpFamily kFamily>
constexpr auto kFamilyTable =
    family_table<Impl, kFamily>(std::make_index_sequence<kOpsOfFamily<kFamily>.size()>{});

}  // namespace

KernelFn binary_kernel(OpKind op) {
  return kFamilyTable<BinaryImpl, OpFamily::kBinary>[index_in_family(op)];
}
KernelFn unary_kernel(OpKind op) {
  return kFamilyTable<UnaryImpl, OpFamily::kUnary>[index_in_family(op)];
}
KernelFn norm_kernel(OpKind op) {
  return kFamilyTable<NormImpl, OpFamily::kNorm>[index_in_family(op)];
}
KernelFn reduce_kernel(OpKind op) {
  return kFamilyTable<ReduceImpl, OpFamily::kReduce>[index_in_family(op)];
}

Status cast_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 1));
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  const std::optional<device::Type> from = device_type(x.dtype()), to = device_type(out.dtype());
  if (!from || !to) {
    return invalid_argument_error(
        fmt::format("{}: cast {} -> {}: the kernel casts among f32, "
                    "f16, bf16 and i32",
                    label(call), name(x.dtype()), name(out.dtype())));
  }
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(call, x, out));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, out));
  return launched(
      device::cast(*from, x.first(), layout_of(x), *to, out.first(), out.numel(), stream), call);
}

namespace {

// The element size the copy kernel moves for a layout op's dtype.
Result<int> layout_bytes(const KernelCall& call) {
  const DType t = call.outputs[0].dtype();
  for (const TensorView& v : call.inputs) {
    if (v.dtype() != t) {
      return invalid_argument_error(
          fmt::format("{}: operand is {}, output is {}", label(call), name(v.dtype()), name(t)));
    }
  }
  if (!device_type(t)) {
    return invalid_argument_error(
        fmt::format("{}: {} is not f32, f16, bf16 or i32", label(call), name(t)));
  }
  return dense_bytes(t);
}

}  // namespace

Status copy_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 1));
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  SWITCHYARD_ASSIGN_OR_RETURN(int bytes, layout_bytes(call));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(call, x, out));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, out));
  return launched(device::copy(bytes, x.first(), layout_of(x), out.first(), layout_of(out),
                               out.numel(), stream),
                  call);
}

Status transpose_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 1));
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  SWITCHYARD_ASSIGN_OR_RETURN(int bytes, layout_bytes(call));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, out));
  const int rank = x.rank();
  bool ok = rank >= 2 && out.rank() == rank && out.dim(rank - 1) == x.dim(rank - 2) &&
            out.dim(rank - 2) == x.dim(rank - 1);
  for (int d = 0; ok && d < rank - 2; ++d) ok = out.dim(d) == x.dim(d);
  if (!ok) {
    return invalid_argument_error(fmt::format("{}: {} -> {} is not [..., A, B] -> [..., B, A]",
                                              label(call), x.shape().to_string(),
                                              out.shape().to_string()));
  }
  // The source read in the output's order: its last two dimensions swapped.
  device::Layout src = layout_of(x);
  std::swap(src.dims[rank - 1], src.dims[rank - 2]);
  std::swap(src.strides[rank - 1], src.strides[rank - 2]);
  src.contiguous = false;
  return launched(
      device::copy(bytes, x.first(), src, out.first(), layout_of(out), out.numel(), stream), call);
}

Status concat_kernel(const KernelCall& call) {
  const std::size_t inputs = call.inputs.size();
  if (inputs < 1) return invalid_argument_error(fmt::format("{}: no inputs", label(call)));
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, inputs));
  const TensorView& out = call.outputs[0];
  SWITCHYARD_ASSIGN_OR_RETURN(int bytes, layout_bytes(call));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, out));
  const int rank = out.rank();
  const int axis = call.params.axis < 0 ? call.params.axis + rank : call.params.axis;
  if (axis < 0 || axis >= rank) {
    return invalid_argument_error(
        fmt::format("{}: axis {} is outside rank {}", label(call), call.params.axis, rank));
  }
  std::int64_t at = 0;
  for (const TensorView& x : call.inputs) {
    bool fits = x.rank() == rank;
    for (int d = 0; fits && d < rank; ++d) fits = d == axis || x.dim(d) == out.dim(d);
    if (!fits || at + x.dim(axis) > out.dim(axis)) {
      return invalid_argument_error(fmt::format("{}: input {} does not fit output {} on axis {}",
                                                label(call), x.shape().to_string(),
                                                out.shape().to_string(), axis));
    }
    at += x.dim(axis);
  }
  if (at != out.dim(axis)) {
    return invalid_argument_error(fmt::format("{}: inputs fill {} of {} along axis {}", label(call),
                                              at, out.dim(axis), axis));
  }
  // Each input goes to its slab of the output: the output's strides, the input's
  // dims, starting `at` along the axis.
  at = 0;
  for (const TensorView& x : call.inputs) {
    device::Layout dst = layout_of(out);
    for (int d = 0; d < rank; ++d) dst.dims[d] = x.dim(d);
    // A slab along the outermost axis of a contiguous output is itself contiguous.
    dst.contiguous = axis == 0 || x.dim(axis) == out.dim(axis);
    std::byte* base = out.first() + at * out.stride(axis) * bytes;
    SWITCHYARD_RETURN_IF_ERROR(
        launched(device::copy(bytes, x.first(), layout_of(x), base, dst, x.numel(), stream), call));
    at += x.dim(axis);
  }
  return Status::ok();
}

Status softmax_kernel(const KernelCall& call) {
  const std::size_t inputs = call.inputs.size();
  if (inputs != 1 && inputs != 2) {
    return invalid_argument_error(
        fmt::format("{}: expected x and an optional mask, got {} inputs", label(call), inputs));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, inputs));
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  SWITCHYARD_ASSIGN_OR_RETURN(device::Type type, float_type(call, call.inputs));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(call, x, out));
  for (const TensorView& t : call.inputs) SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, t));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, out));
  if (x.rank() < 1) {
    return invalid_argument_error(fmt::format("{}: x must have rank >= 1", label(call)));
  }
  const std::int64_t c = x.dim(x.rank() - 1);
  const std::int64_t r = x.rank() >= 2 ? x.dim(x.rank() - 2) : 1;
  const std::int64_t batch = r * c > 0 ? x.numel() / (r * c) : 0;
  const void* mask = nullptr;
  if (inputs == 2) {
    const TensorView& m = call.inputs[1];
    if (m.rank() != 2 || m.dim(0) != r || m.dim(1) != c) {
      return invalid_argument_error(fmt::format("{}: mask must have shape [{}, {}], got {}",
                                                label(call), r, c, m.shape().to_string()));
    }
    mask = m.first();
  }
  return launched(
      device::softmax(type, x.first(), mask, out.first(), batch, r, c, call.params.scale,
                      call.params.causal, call.params.query_offset, stream),
      call);
}

Status rope_kernel(const KernelCall& call) {
  // x, positions, and optionally per-pair frequency factors.
  const bool factored = call.inputs.size() == 3;
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, factored ? 3 : 2));
  const TensorView &x = call.inputs[0], &pos = call.inputs[1], &out = call.outputs[0];
  SWITCHYARD_ASSIGN_OR_RETURN(device::Type type,
                              float_type(call, std::span<const TensorView>(&x, 1)));
  if (pos.dtype() != DType::kI32) {
    return invalid_argument_error(
        fmt::format("{}: positions are {}, kernel takes i32", label(call), name(pos.dtype())));
  }
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(call, x, out));
  for (const TensorView* t : {&x, &pos, &out}) {
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, *t));
  }
  if (x.rank() < 3) {
    return invalid_argument_error(
        fmt::format("{}: x must be [..., T, H, D], got {}", label(call), x.shape().to_string()));
  }
  const std::int64_t d = x.dim(x.rank() - 1), heads = x.dim(x.rank() - 2);
  const std::int64_t tokens = x.dim(x.rank() - 3);
  if (pos.rank() != 1 || pos.dim(0) != tokens) {
    return invalid_argument_error(fmt::format("{}: positions must have shape [{}], got {}",
                                              label(call), tokens, pos.shape().to_string()));
  }
  const std::int64_t dims = call.params.rope_dims == 0 ? d : call.params.rope_dims;
  if (dims < 0 || dims > d || dims % 2 != 0) {
    return invalid_argument_error(fmt::format(
        "{}: rope_dims {} must be even and within the head size {}", label(call), dims, d));
  }
  const float* factors = nullptr;
  if (factored) {
    const TensorView& f = call.inputs[2];
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, f));
    if (f.dtype() != DType::kF32 || f.rank() != 1 || f.dim(0) != dims / 2) {
      return invalid_argument_error(fmt::format("{}: frequency factors must be f32 [{}], got {} {}",
                                                label(call), dims / 2, name(f.dtype()),
                                                f.shape().to_string()));
    }
    factors = f.first_as<const float>();
  }
  const std::int64_t per_batch = tokens * heads * d;
  const std::int64_t batch = per_batch > 0 ? x.numel() / per_batch : 0;
  return launched(
      device::rope(type, x.first(), pos.first_as<const std::int32_t>(), factors, out.first(), batch,
                   tokens, heads, d, call.params.rope_mode == RopeMode::kNeox ? 1 : 0,
                   call.params.rope_base, dims, stream),
      call);
}

Status get_rows_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 2));
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  const TensorView &table = call.inputs[0], &idx = call.inputs[1], &out = call.outputs[0];
  const std::optional<device::Type> table_type = device_type(table.dtype());
  const std::optional<device::Type> out_type = device_type(out.dtype());
  if (!table_type || *table_type == device::Type::kI32 || !out_type ||
      *out_type == device::Type::kI32 || idx.dtype() != DType::kI32) {
    return invalid_argument_error(
        fmt::format("{}: takes a float table, i32 indices and a float output; got {}, {} and {}",
                    label(call), name(table.dtype()), name(idx.dtype()), name(out.dtype())));
  }
  SWITCHYARD_RETURN_IF_ERROR(check_get_rows_layout(call));
  // An index out of range is found on the device and reported when the stream is
  // next synchronized (CudaMemory::synchronize), as kOutOfRange.
  return launched(device::get_rows(*table_type, table.first(), table.dim(0), table.dim(1),
                                   idx.first_as<const std::int32_t>(), idx.dim(0), *out_type,
                                   out.first(), s->error_device, stream),
                  call);
}

Status set_rows_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 3));
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  const TensorView &dst = call.inputs[0], &src = call.inputs[1], &idx = call.inputs[2];
  const TensorView& out = call.outputs[0];
  const std::optional<device::Type> src_type = device_type(src.dtype());
  const std::optional<device::Type> out_type = device_type(out.dtype());
  const bool q8_0 = out.dtype() == DType::kQ8_0;  // a q8_0 KV cache
  if (!src_type || *src_type == device::Type::kI32 || (!out_type && !q8_0) ||
      (out_type && *out_type == device::Type::kI32) || dst.dtype() != out.dtype() ||
      idx.dtype() != DType::kI32) {
    return invalid_argument_error(fmt::format(
        "{}: takes a float or q8_0 dst, a float src, i32 indices and an output of dst's dtype; "
        "got {}, {}, {} and {}",
        label(call), name(dst.dtype()), name(src.dtype()), name(idx.dtype()), name(out.dtype())));
  }
  for (const TensorView* t : {&dst, &src, &idx, &out}) {
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, *t));
  }
  if (dst.rank() != 2 || src.rank() != 2 || idx.rank() != 1 || !(out.shape() == dst.shape()) ||
      src.dim(1) != dst.dim(1) || idx.dim(0) != src.dim(0)) {
    return invalid_argument_error(
        fmt::format("{}: {}, {} at {} -> {} is not [R, C], [N, C] at [N] -> [R, C]", label(call),
                    dst.shape().to_string(), src.shape().to_string(), idx.shape().to_string(),
                    out.shape().to_string()));
  }
  if (q8_0 && dst.dim(1) % block_elems(DType::kQ8_0) != 0) {
    return invalid_argument_error(
        fmt::format("{}: rows of {} values are not whole q8_0 blocks of {}", label(call),
                    dst.dim(1), block_elems(DType::kQ8_0)));
  }
  // Not in place: the output first takes dst's values, on the same stream.
  if (dst.first() != out.first()) {
    const auto bytes = static_cast<std::size_t>(dst.dim(0) * dst.dim(1) / block_elems(dst.dtype()) *
                                                block_bytes(dst.dtype()));
    const auto* a = static_cast<const std::byte*>(dst.first());
    const auto* b = static_cast<const std::byte*>(out.first());
    if (a < b + bytes && b < a + bytes) {
      return invalid_argument_error(fmt::format(
          "{}: the output overlaps dst without being it; bind the same tensor for an update in "
          "place, or disjoint memory",
          label(call)));
    }
    SWITCHYARD_RETURN_IF_ERROR(launched(
        cudaMemcpyAsync(out.first(), dst.first(), bytes, cudaMemcpyDeviceToDevice, stream), call));
  }
  // An index out of range is found on the device and reported when the stream is
  // next synchronized, as kOutOfRange.
  if (q8_0) {
    return launched(device::set_rows_q8_0(*src_type, src.first(), src.dim(0), src.dim(1),
                                          idx.first_as<const std::int32_t>(), out.first(),
                                          out.dim(0), s->error_device, stream),
                    call);
  }
  return launched(device::set_rows(*src_type, src.first(), src.dim(0), src.dim(1),
                                   idx.first_as<const std::int32_t>(), *out_type, out.first(),
                                   out.dim(0), s->error_device, stream),
                  call);
}

namespace {

// One attention call's operands, checked: both siblings take the same.
struct AttentionOperands {
  cudaStream_t stream = nullptr;
  device::Type qt{}, kvt{};
  bool q8_0 = false;  // k and v q8_0 (a q8_0 KV cache), q f32; kvt unset
  device::AttentionShape s;
  const void* mask = nullptr;
};

Result<AttentionOperands> check_attention(const KernelCall& call) {
  const std::size_t inputs = call.inputs.size();
  if (inputs != 3 && inputs != 4) {
    return invalid_argument_error(fmt::format(
        "{}: expected q, k, v and an optional mask, got {} inputs", label(call), inputs));
  }
  AttentionOperands a;
  SWITCHYARD_ASSIGN_OR_RETURN(a.stream, prepare(call, inputs));
  const TensorView &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2];
  const TensorView& out = call.outputs[0];
  a.q8_0 = k.dtype() == DType::kQ8_0 && q.dtype() == DType::kF32;
  const std::optional<device::Type> qt = device_type(q.dtype()), kvt = device_type(k.dtype());
  if (!qt || (!kvt && !a.q8_0) || *qt == device::Type::kI32 ||
      (kvt && *kvt == device::Type::kI32) || v.dtype() != k.dtype() || out.dtype() != q.dtype() ||
      (inputs == 4 && call.inputs[3].dtype() != q.dtype()) ||
      (q.dtype() != DType::kF32 && k.dtype() != q.dtype())) {
    return invalid_argument_error(fmt::format(
        "{}: dtypes q {}, k {}, v {}, out {}: the kernel takes q, mask and out of one "
        "float dtype and k, v of that dtype or, for f32 q, f16, bf16 or q8_0",
        label(call), name(q.dtype()), name(k.dtype()), name(v.dtype()), name(out.dtype())));
  }
  for (const TensorView& t : call.inputs) SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, t));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(call, out));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(call, q, out));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(call, k, v));
  const int rank = q.rank();
  bool ok = rank >= 3 && k.rank() == rank;
  for (int d = 0; ok && d < rank - 3; ++d) ok = q.dim(d) == k.dim(d);
  device::AttentionShape& s = a.s;
  if (ok) {
    s.sq = q.dim(rank - 3);
    s.heads = q.dim(rank - 2);
    s.head_dim = q.dim(rank - 1);
    s.skv = k.dim(rank - 3);
    s.kv_heads = k.dim(rank - 2);
    const std::int64_t per_batch = s.sq * s.heads * s.head_dim;
    s.batch = per_batch > 0 ? q.numel() / per_batch : 1;
  }
  ok = ok && k.dim(rank - 1) == s.head_dim && s.kv_heads > 0 && s.heads % s.kv_heads == 0;
  if (!ok) {
    return invalid_argument_error(fmt::format(
        "{}: q {} and k/v {} are not [..., Sq, H, Dh] and [..., Skv, Hkv, Dh] with H divisible "
        "by Hkv",
        label(call), q.shape().to_string(), k.shape().to_string()));
  }
  if (s.head_dim > device::kMaxHeadDim) {
    return invalid_argument_error(fmt::format("{}: head dimension {} is above the kernel's {}",
                                              label(call), s.head_dim, device::kMaxHeadDim));
  }
  if (a.q8_0 && s.head_dim % block_elems(DType::kQ8_0) != 0) {
    return invalid_argument_error(
        fmt::format("{}: q8_0 keys and values need a head size that is whole blocks of {}, not {}",
                    label(call), block_elems(DType::kQ8_0), s.head_dim));
  }
  if (inputs == 4) {
    const TensorView& m = call.inputs[3];
    if (m.rank() != 2 || m.dim(0) != s.sq || m.dim(1) != s.skv) {
      return invalid_argument_error(fmt::format("{}: mask must have shape [{}, {}], got {}",
                                                label(call), s.sq, s.skv, m.shape().to_string()));
    }
    a.mask = m.first();
  }
  a.qt = *qt;
  if (kvt) a.kvt = *kvt;
  return a;
}

}  // namespace

Status attention_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(const AttentionOperands a, check_attention(call));
  const device::AttentionShape& s = a.s;
  // Note [Splitting the keys across blocks] (device.h): the partial results live
  // in the stream's scratch.
  const std::int64_t splits =
      a.q8_0 ? device::attention_splits_q8_0(s) : device::attention_splits(s, a.kvt);
  float* partial = nullptr;
  if (splits > 1) {
    SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * cs, stream_of(call));
    const auto bytes =
        static_cast<std::size_t>(s.batch * s.sq * s.heads * splits * (s.head_dim + 2)) *
        sizeof(float);
    SWITCHYARD_ASSIGN_OR_RETURN(void* p, scratch(*cs, bytes));
    partial = static_cast<float*>(p);
  }
  if (a.q8_0) {
    return launched(device::attention_q8_0(
                        call.inputs[0].first_as<const float>(), call.inputs[1].first(),
                        call.inputs[2].first(), static_cast<const float*>(a.mask),
                        call.outputs[0].first_as<float>(), s, call.params.scale, call.params.causal,
                        call.params.query_offset, splits, partial, a.stream),
                    call);
  }
  return launched(device::attention(a.qt, a.kvt, call.inputs[0].first(), call.inputs[1].first(),
                                    call.inputs[2].first(), a.mask, call.outputs[0].first(), s,
                                    call.params.scale, call.params.causal, call.params.query_offset,
                                    splits, partial, a.stream),
                  call);
}

Status attention_tc_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(const AttentionOperands a, check_attention(call));
  if (a.q8_0) {
    return invalid_argument_error(
        fmt::format("{}: q8_0 k and v have no tensor-core path", label(call)));
  }
  if (a.s.head_dim > device::kMaxTensorCoreHeadDim) {
    return invalid_argument_error(
        fmt::format("{}: head dimension {} is above the tensor-core kernel's {}", label(call),
                    a.s.head_dim, device::kMaxTensorCoreHeadDim));
  }
  if (a.qt == device::Type::kF32 && a.kvt == device::Type::kF32) {
    return invalid_argument_error(
        fmt::format("{}: f32 k and v have no tensor-core path", label(call)));
  }
  return launched(device::attention_tensor_cores(
                      a.qt, a.kvt, call.inputs[0].first(), call.inputs[1].first(),
                      call.inputs[2].first(), a.mask, call.outputs[0].first(), a.s,
                      call.params.scale, call.params.causal, call.params.query_offset, a.stream),
                  call);
}

bool admits_tensor_core_attention(std::span<const Shape> shapes) {
  if (shapes.empty() || shapes[0].rank() < 3) return false;
  return shapes[0][shapes[0].rank() - 1] <= device::kMaxTensorCoreHeadDim;
}

}  // namespace switchyard::cuda
