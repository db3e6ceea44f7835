#include <cstring>

#include "backends/cpu/layout/layout.h"
#include "backends/cpu/q8_0_rows.h"
#include "backends/cpu/simd_rows.h"

namespace switchyard::cpu {
namespace {

// Every index is checked before anything is written: kOutOfRange names the first
// outside [0, rows).
Status check_rows(const std::int32_t* idx, std::int64_t n, std::int64_t rows,
                  std::string_view kernel) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (idx[i] < 0 || idx[i] >= rows) {
      return out_of_range_error(
          fmt::format("{}: index {} at position {} is outside [0, {})", kernel, idx[i], i, rows));
    }
  }
  return Status::ok();
}

// Rows are copied (same dtype) or converted; the SIMD siblings convert through
// the elementwise cast rows, which round exactly as the reference does.
template <typename T, typename O, Variant kVariant>
Status get_rows_kernel_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 2, 1, kernel));
  const TensorView& table = call.inputs[0];
  const TensorView& idx = call.inputs[1];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(table, kDTypeOf<T>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(idx, DType::kI32, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, kDTypeOf<O>, kernel));
  for (const TensorView* t : {&table, &idx, &out}) {
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(*t, kernel));
  }
  if (table.rank() != 2 || idx.rank() != 1 || out.rank() != 2 || out.dim(0) != idx.dim(0) ||
      out.dim(1) != table.dim(1)) {
    return invalid_argument_error(
        fmt::format("{}: shapes {}, {} -> {} are not [R, C], [N] -> [N, C]", kernel,
                    table.shape().to_string(), idx.shape().to_string(), out.shape().to_string()));
  }
  const std::int64_t rows = table.dim(0);
  const std::int64_t cols = table.dim(1);
  const std::int64_t n = idx.dim(0);
  const std::int32_t* pi = idx.first_as<const std::int32_t>();
  SWITCHYARD_RETURN_IF_ERROR(check_rows(pi, n, rows, kernel));
  const T* pt = table.first_as<const T>();
  O* po = out.first_as<O>();
  call.ctx.parallel_for(n, row_grain(cols), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const T* src = pt + static_cast<std::int64_t>(pi[i]) * cols;
      O* dst = po + i * cols;
      if constexpr (std::is_same_v<T, O>) {
        std::memcpy(dst, src, static_cast<std::size_t>(cols) * sizeof(T));
      } else if constexpr (kVariant != Variant::kRef) {
        const ElementwiseSimd& t =
            kVariant == Variant::kAvx512 ? elementwise_avx512() : elementwise_avx2();
        t.cast[static_cast<int>(kStorageOf<T>)][static_cast<int>(kStorageOf<O>)](src, dst, cols);
      } else {
        for (std::int64_t j = 0; j < cols; ++j) dst[j] = from_f32<O>(to_f32(src[j]));
      }
    }
  });
  return Status::ok();
}

template <typename T, Variant kVariant>
KernelFn get_rows_to(DType out) {
  // A same-dtype lookup is a memcpy in every variant: only the reference serves it.
  constexpr bool kRef = kVariant == Variant::kRef;
  switch (out) {
    case DType::kF32:
      return kRef || !std::is_same_v<T, float> ? &get_rows_kernel_impl<T, float, kVariant>
                                               : nullptr;
    case DType::kF16:
      return kRef || !std::is_same_v<T, F16> ? &get_rows_kernel_impl<T, F16, kVariant> : nullptr;
    case DType::kBF16:
      return kRef || !std::is_same_v<T, BF16> ? &get_rows_kernel_impl<T, BF16, kVariant> : nullptr;
    default: return nullptr;
  }
}

template <Variant kVariant>
KernelFn get_rows_for(DType table, DType out) {
  switch (table) {
    case DType::kF32: return get_rows_to<float, kVariant>(out);
    case DType::kF16: return get_rows_to<F16, kVariant>(out);
    case DType::kBF16: return get_rows_to<BF16, kVariant>(out);
    default: return nullptr;
  }
}

// Note [Rows written in place]
// set_rows exists so that a KV cache can take a step's new rows inside the graph:
// the caller binds the cache as both the dst input and the output, and then only
// the N rows move. When the output is other memory it first receives a copy of
// dst, as the op's value semantics say. A partial overlap of the two has no
// meaning and is refused; so is an index out of range, before anything is
// written. Indices are expected distinct: a repeat leaves one of its rows,
// unspecified which (rows are written in parallel).
//
// The checks every set_rows makes after its arity, and the copy of dst into the
// output when the two differ; the row indices on success. `row_bytes` is one
// row's size.
Result<const std::int32_t*> prepare_set_rows(const KernelCall& call, DType dst_dtype,
                                             DType src_dtype, std::size_t row_bytes,
                                             std::string_view kernel) {
  const TensorView& dst = call.inputs[0];
  const TensorView& src = call.inputs[1];
  const TensorView& idx = call.inputs[2];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(dst, dst_dtype, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(src, src_dtype, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(idx, DType::kI32, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, dst_dtype, kernel));
  for (const TensorView* t : {&dst, &src, &idx, &out}) {
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(*t, kernel));
  }
  if (dst.rank() != 2 || src.rank() != 2 || idx.rank() != 1 || !(out.shape() == dst.shape()) ||
      src.dim(1) != dst.dim(1) || idx.dim(0) != src.dim(0)) {
    return invalid_argument_error(
        fmt::format("{}: shapes {}, {}, {} -> {} are not [R, C], [N, C], [N] -> [R, C]", kernel,
                    dst.shape().to_string(), src.shape().to_string(), idx.shape().to_string(),
                    out.shape().to_string()));
  }
  const std::int32_t* pi = idx.first_as<const std::int32_t>();
  SWITCHYARD_RETURN_IF_ERROR(check_rows(pi, idx.dim(0), dst.dim(0), kernel));
  const std::byte* pd = dst.first();
  std::byte* po = out.first();
  const std::size_t bytes = static_cast<std::size_t>(dst.dim(0)) * row_bytes;
  if (pd != po) {
    if (pd < po + bytes && po < pd + bytes) {
      return invalid_argument_error(fmt::format(
          "{}: the output overlaps dst without being it; bind the same tensor for an update in "
          "place, or disjoint memory",
          kernel));
    }
    std::memcpy(po, pd, bytes);
  }
  return pi;
}

template <typename D, typename S>
Status set_rows_kernel_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 3, 1, kernel));
  const std::int64_t cols = call.inputs[0].rank() == 2 ? call.inputs[0].dim(1) : 0;
  SWITCHYARD_ASSIGN_OR_RETURN(const std::int32_t* pi,
                              prepare_set_rows(call, kDTypeOf<D>, kDTypeOf<S>,
                                               static_cast<std::size_t>(cols) * sizeof(D), kernel));
  D* po = call.outputs[0].first_as<D>();
  const S* ps = call.inputs[1].first_as<const S>();
  call.ctx.parallel_for(call.inputs[2].dim(0), row_grain(cols),
                        [&](std::int64_t begin, std::int64_t end) {
                          for (std::int64_t i = begin; i < end; ++i) {
                            const S* from = ps + i * cols;
                            D* to = po + static_cast<std::int64_t>(pi[i]) * cols;
                            if constexpr (std::is_same_v<S, D>) {
                              std::memcpy(to, from, static_cast<std::size_t>(cols) * sizeof(D));
                            } else {
                              for (std::int64_t j = 0; j < cols; ++j)
                                to[j] = from_f32<D>(to_f32(from[j]));
                            }
                          }
                        });
  return Status::ok();
}

// Note [A q8_0 KV cache]
// A cache of q8_0 rows holds each key and value in 34 bytes per 32 (against 64
// in f16), so decoding reads a little over half the bytes. set_rows quantizes
// each new row block by block as GGUF's q8_0 quantizer does (one f16 scale,
// amax / 127, per 32 values; q8_0_rows.h), so a value is kept within
// amax / 254 plus the scale's f16 rounding of its block's largest magnitude,
// and attention dequantizes the blocks it reads (attention_simd.inl). A row is
// a whole number of blocks: a head size that is a multiple of 32. On the CPU
// this buys memory, not speed: attention is bound by its arithmetic there, and
// dequantizing costs more than the bytes saved (docs/benchmarks.md, table 9).
template <typename S>
Status set_rows_q8_0_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 3, 1, kernel));
  const std::int64_t cols = call.inputs[0].rank() == 2 ? call.inputs[0].dim(1) : 0;
  if (cols % kQ8_0Values != 0) {
    return invalid_argument_error(fmt::format(
        "{}: rows of {} values are not whole q8_0 blocks of {}", kernel, cols, kQ8_0Values));
  }
  const std::int64_t blocks = cols / kQ8_0Values;
  SWITCHYARD_ASSIGN_OR_RETURN(
      const std::int32_t* pi,
      prepare_set_rows(call, DType::kQ8_0, kDTypeOf<S>,
                       static_cast<std::size_t>(blocks) * sizeof(Q8_0Block), kernel));
  auto* po = reinterpret_cast<Q8_0Block*>(call.outputs[0].first());
  const S* ps = call.inputs[1].first_as<const S>();
  call.ctx.parallel_for(call.inputs[2].dim(0), row_grain(cols),
                        [&](std::int64_t begin, std::int64_t end) {
                          float values[kQ8_0Values];
                          for (std::int64_t i = begin; i < end; ++i) {
                            Q8_0Block* to = po + static_cast<std::int64_t>(pi[i]) * blocks;
                            for (std::int64_t b = 0; b < blocks; ++b) {
                              const S* from = ps + i * cols + b * kQ8_0Values;
                              for (std::int64_t j = 0; j < kQ8_0Values; ++j)
                                values[j] = to_f32(from[j]);
                              quantize_q8_0_block(values, to[b]);
                            }
                          }
                        });
  return Status::ok();
}

template <typename D>
KernelFn set_rows_from(DType src) {
  switch (src) {
    case DType::kF32: return &set_rows_kernel_impl<D, float>;
    case DType::kF16: return &set_rows_kernel_impl<D, F16>;
    case DType::kBF16: return &set_rows_kernel_impl<D, BF16>;
    default: return nullptr;
  }
}

}  // namespace

KernelFn set_rows_kernel(DType dst, DType src) {
  switch (dst) {
    case DType::kQ8_0:
      switch (src) {
        case DType::kF32: return &set_rows_q8_0_impl<float>;
        case DType::kF16: return &set_rows_q8_0_impl<F16>;
        case DType::kBF16: return &set_rows_q8_0_impl<BF16>;
        default: return nullptr;
      }
    case DType::kF32: return set_rows_from<float>(src);
    case DType::kF16: return set_rows_from<F16>(src);
    case DType::kBF16: return set_rows_from<BF16>(src);
    default: return nullptr;
  }
}

KernelFn get_rows_kernel(DType table, DType out, Variant variant) {
  switch (variant) {
    case Variant::kRef: return get_rows_for<Variant::kRef>(table, out);
    case Variant::kAvx2: return get_rows_for<Variant::kAvx2>(table, out);
    case Variant::kAvx512: return get_rows_for<Variant::kAvx512>(table, out);
  }
  return nullptr;
}

}  // namespace switchyard::cpu
