#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/cpu/layout/layout.h"
#include "backends/cpu/layout/layout_simd.h"

namespace switchyard::cpu {
namespace {

// Layout kernels move bits: an element is an unsigned integer of its size.
template <std::size_t kBytes>
using Bits = std::conditional_t<kBytes == 4, std::uint32_t, std::uint16_t>;

// The SIMD pieces of a sibling; only AVX2 has them.
const LayoutSimd& layout_table(Variant /*v*/) { return layout_avx2(); }

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
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 1, 1, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_layout_dtypes(call, kDType, kernel));
  const TensorView& x = call.inputs[0];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(x, out, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kernel));
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

// x [..., A, B] -> out [..., B, A], out contiguous.
Status check_transpose(const KernelCall& call, DType t, std::string_view kernel) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 1, 1, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_layout_dtypes(call, t, kernel));
  const TensorView& x = call.inputs[0];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kernel));
  const int rank = x.rank();
  bool shape_ok = rank >= 2 && out.rank() == rank;
  for (int i = 0; shape_ok && i < rank - 2; ++i) shape_ok = x.dim(i) == out.dim(i);
  shape_ok =
      shape_ok && out.dim(rank - 2) == x.dim(rank - 1) && out.dim(rank - 1) == x.dim(rank - 2);
  if (!shape_ok) {
    return invalid_argument_error(fmt::format("{}: {} -> {} is not [..., A, B] -> [..., B, A]",
                                              kernel, x.shape().to_string(),
                                              out.shape().to_string()));
  }
  return Status::ok();
}

// The element offset of matrix m (over the batch dimensions) in x.
std::int64_t matrix_offset(const TensorView& x, std::int64_t m) {
  std::int64_t base = x.offset();
  for (int d = x.rank() - 3; d >= 0; --d) {
    base += (m % x.dim(d)) * x.stride(d);
    m /= x.dim(d);
  }
  return base;
}

template <std::size_t kBytes, DType kDType>
Status transpose_kernel_impl(const KernelCall& call) {
  using E = Bits<kBytes>;
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_transpose(call, kDType, kernel));
  const TensorView& x = call.inputs[0];
  const TensorView& out = call.outputs[0];
  const int rank = x.rank();
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
      const std::int64_t base = matrix_offset(x, m);
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

// Note [Transpose panels]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The SIMD sibling transposes register tiles (layout_avx2.cpp, Note [Transpose
// tiles]) eight input columns at a time; each column step writes a run of each of
// eight output rows. The output rows of a large matrix are pages apart, and what
// a transpose pays for is the output: with ordinary stores every line written is
// first read for ownership, from lines no hardware prefetcher sees coming, and
// each visit to an output row may cost a page walk. Two paths:
//
// * Outputs of kStreamBytes or more (far past L2 and most of a core's share of
//   L3, so a consumer would mostly miss them in cache anyway) whose lines can be
//   written whole (output 64-byte aligned, row pitch a multiple of 64 bytes) are
//   streamed (Note [Streamed transposes]): non-temporal stores of whole lines, so
//   memory sees one read and one write per line, as for a copy. A task is a block
//   of kStreamRows input rows by 1 KiB of each (stream_run_bytes), walked down its
//   rows (kStreamRows also spreads matrices of few columns over the threads):
//   each of the block's output rows is written front to back, staying on a page
//   for 4 KiB, while the input is read in 1 KiB runs prefetched in software. On a
//   4096 x 4096 transpose (the benchmark's BM_CpuOp, whose copy peer uses
//   ordinary stores) this took f32 from about 0.6 of the copy's bandwidth to
//   1.2-1.4 and f16 from about 0.55 to 1.2-1.4, on one thread and on two.
// * Smaller (or misaligned) outputs keep ordinary stores, so that a consumer
//   finds the result in cache. Tasks are panels of whole input rows (128 rows of
//   4-byte elements, 256 of 2-byte ones; LayoutSimd) whose column steps write
//   512 contiguous bytes of each of eight output rows: whole lines where rows
//   are line-aligned, with the lines of a later step prefetched in software, as
//   are the input rows (more streams than the hardware follows). A step's input
//   lines (8 or 16 KiB) and output lines (4 KiB) stay in L1 whatever the row
//   pitch. Several panels go to a task when a panel is short, so that a task
//   moves about kElementGrain elements.
//
// Inputs whose columns are not unit-stride take the reference's scalar tiles.
constexpr std::int64_t kStreamBytes = std::int64_t{8} << 20;
constexpr std::int64_t kStreamRows = 1024;

template <std::size_t kBytes, DType kDType, Variant kVariant>
Status transpose_simd_impl(const KernelCall& call) {
  using E = Bits<kBytes>;
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR(check_transpose(call, kDType, kernel));
  const TensorView& x = call.inputs[0];
  const int rank = x.rank();
  const std::int64_t a = x.dim(rank - 2);
  const std::int64_t b = x.dim(rank - 1);
  if (b > 1 && x.stride(rank - 1) != 1) return transpose_kernel_impl<kBytes, kDType>(call);
  const std::int64_t sa = x.stride(rank - 2);
  const std::int64_t batch = a * b > 0 ? x.numel() / (a * b) : 0;
  const E* px = static_cast<const E*>(x.data());
  E* po = call.outputs[0].first_as<E>();
  const LayoutSimd& simd = layout_table(kVariant);
  if (x.numel() * static_cast<std::int64_t>(kBytes) >= kStreamBytes &&
      reinterpret_cast<std::uintptr_t>(po) % 64 == 0 &&
      a * static_cast<std::int64_t>(kBytes) % 64 == 0) {
    const TransposeBlockFn fn = kBytes == 4 ? simd.transpose4_stream : simd.transpose2_stream;
    const std::int64_t block_cols = simd.stream_run_bytes / static_cast<std::int64_t>(kBytes);
    const std::int64_t col_blocks = (b + block_cols - 1) / block_cols;
    const std::int64_t row_blocks = (a + kStreamRows - 1) / kStreamRows;
    call.ctx.parallel_for(
        batch * col_blocks * row_blocks, 1, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t task = begin; task < end; ++task) {
            const std::int64_t m = task / (col_blocks * row_blocks);
            const std::int64_t j0 = task / row_blocks % col_blocks * block_cols;
            const std::int64_t i0 = task % row_blocks * kStreamRows;
            fn(px + matrix_offset(x, m) + i0 * sa + j0, sa, po + m * a * b + j0 * a + i0, a,
               std::min(a, i0 + kStreamRows) - i0, std::min(b, j0 + block_cols) - j0);
          }
        });
    return Status::ok();
  }
  const TransposeBlockFn fn = kBytes == 4 ? simd.transpose4 : simd.transpose2;
  const std::int64_t panel = kBytes == 4 ? simd.transpose_panel4 : simd.transpose_panel2;
  const std::int64_t panels = (a + panel - 1) / panel;
  const std::int64_t grain =
      std::max<std::int64_t>(1, kElementGrain / std::max<std::int64_t>(1, panel * b));
  call.ctx.parallel_for(batch * panels, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t m = task / panels;
      const std::int64_t a0 = (task % panels) * panel;
      const std::int64_t rows = std::min(a, a0 + panel) - a0;
      fn(px + matrix_offset(x, m) + a0 * sa, sa, po + m * a * b + a0, a, rows, b);
    }
  });
  return Status::ok();
}

// Inputs that fit `out` along `axis` (returned, non-negative); out contiguous.
Result<int> check_concat(const KernelCall& call, DType t, int inputs, std::string_view kernel) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, inputs, 1, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_layout_dtypes(call, t, kernel));
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kernel));
  const int rank = out.rank();
  const int axis = call.params.axis < 0 ? call.params.axis + rank : call.params.axis;
  if (rank < 1 || axis < 0 || axis >= rank) {
    return invalid_argument_error(
        fmt::format("{}: axis {} is outside rank {}", kernel, call.params.axis, rank));
  }
  std::int64_t total = 0;
  for (const TensorView& in : call.inputs) {
    bool ok = in.rank() == rank;
    for (int d = 0; ok && d < rank; ++d) ok = d == axis || in.dim(d) == out.dim(d);
    if (!ok) {
      return invalid_argument_error(fmt::format("{}: input {} does not fit output {} on axis {}",
                                                kernel, in.shape().to_string(),
                                                out.shape().to_string(), axis));
    }
    total += in.dim(axis);
  }
  if (total != out.dim(axis)) {
    return invalid_argument_error(
        fmt::format("{}: inputs add up to {} along axis {}, output has {}", kernel, total, axis,
                    out.dim(axis)));
  }
  return axis;
}

// Copies input `in`, placed at `start` along `axis`, into the contiguous `po`
// row by row (any strides).
template <typename E>
void concat_rows(const TensorView& in, E* po, const TensorView& out, int axis, std::int64_t start,
                 const ExecContext& ctx) {
  const int rank = out.rank();
  const auto ostrides = contiguous_strides(out.shape());
  const std::int64_t shift = start * ostrides[axis];
  scatter_rows<E>(in, po, ostrides[rank - 1], ctx, [&](std::int64_t r) {
    std::int64_t off = shift;
    for (int d = rank - 2; d >= 0; --d) {
      off += (r % in.dim(d)) * ostrides[d];
      r /= in.dim(d);
    }
    return off;
  });
}

template <std::size_t kBytes, DType kDType, int kInputs>
Status concat_kernel_impl(const KernelCall& call) {
  using E = Bits<kBytes>;
  const std::string_view kernel = kernel_label(call);
  Result<int> axis = check_concat(call, kDType, kInputs, kernel);
  if (!axis.is_ok()) return axis.status();
  const TensorView& out = call.outputs[0];
  E* po = out.first_as<E>();
  std::int64_t start = 0;
  for (const TensorView& in : call.inputs) {
    concat_rows<E>(in, po, out, *axis, start, call.ctx);
    start += in.dim(*axis);
  }
  return Status::ok();
}

// Note [Concat runs]
// ~~~~~~~~~~~~~~~~~~
// Seen from the contiguous output, a concat is a sequence of runs: for each
// index over the dims before the axis, input k contributes dim_k(axis) times the
// product of the dims after the axis contiguous elements, and a contiguous input
// holds each of its runs contiguously too. The sibling splits the output's flat
// range across the pool (kElementGrain elements a chunk, whatever the axis: a
// concat along dim 0 is one run per input, still shared between threads), and a
// chunk walks its runs in output order, copying each piece in one call (short
// pieces in a few vector moves, long ones through memcpy). Writes are sequential
// and every output element is written by exactly one chunk. Inputs that are not
// contiguous are copied afterwards row by row, as by the reference.
template <std::size_t kBytes, DType kDType, int kInputs, Variant kVariant>
Status concat_simd_impl(const KernelCall& call) {
  using E = Bits<kBytes>;
  const std::string_view kernel = kernel_label(call);
  Result<int> checked = check_concat(call, kDType, kInputs, kernel);
  if (!checked.is_ok()) return checked.status();
  const int axis = *checked;
  const TensorView& out = call.outputs[0];
  std::int64_t after = 1;
  for (int d = axis + 1; d < out.rank(); ++d) after *= out.dim(d);
  const std::int64_t row = out.dim(axis) * after;
  // Run k covers [start[k], start[k + 1]) of every output row.
  std::int64_t start[kInputs + 1] = {};
  const E* src[kInputs] = {};
  for (int k = 0; k < kInputs; ++k) {
    const TensorView& in = call.inputs[static_cast<std::size_t>(k)];
    start[k + 1] = start[k] + in.dim(axis) * after;
    if (in.is_contiguous()) src[k] = in.first_as<const E>();
  }
  E* po = out.first_as<E>();
  const auto copy = layout_table(kVariant).copy;
  call.ctx.parallel_for(
      row > 0 ? out.numel() : 0, kElementGrain, [&](std::int64_t begin, std::int64_t end) {
        std::int64_t o = begin / row;
        std::int64_t r = begin % row;
        int k = 0;
        while (r >= start[k + 1]) ++k;
        for (std::int64_t p = begin; p < end;) {
          const std::int64_t n = std::min(start[k + 1] - r, end - p);
          if (src[k] != nullptr) {
            const std::int64_t run = start[k + 1] - start[k];
            copy(po + p, src[k] + o * run + (r - start[k]), static_cast<std::size_t>(n) * kBytes);
          }
          p += n;
          r += n;
          // Past the run: the next input's (runs of none are skipped).
          while (k < kInputs && r == start[k + 1]) ++k;
          if (k == kInputs) {
            k = 0;
            r = 0;
            ++o;
            while (start[k + 1] == 0) ++k;
          }
        }
      });
  for (int k = 0; k < kInputs; ++k) {
    if (src[k] != nullptr) continue;
    const TensorView& in = call.inputs[static_cast<std::size_t>(k)];
    concat_rows<E>(in, po, out, axis, start[k] / after, call.ctx);
  }
  return Status::ok();
}

template <int kInputs, Variant kVariant>
KernelFn concat_for(DType t) {
  if constexpr (kVariant == Variant::kRef) {
    switch (t) {
      case DType::kF32: return &concat_kernel_impl<4, DType::kF32, kInputs>;
      case DType::kI32: return &concat_kernel_impl<4, DType::kI32, kInputs>;
      case DType::kF16: return &concat_kernel_impl<2, DType::kF16, kInputs>;
      case DType::kBF16: return &concat_kernel_impl<2, DType::kBF16, kInputs>;
      default: return nullptr;
    }
  } else {
    switch (t) {
      case DType::kF32: return &concat_simd_impl<4, DType::kF32, kInputs, kVariant>;
      case DType::kI32: return &concat_simd_impl<4, DType::kI32, kInputs, kVariant>;
      case DType::kF16: return &concat_simd_impl<2, DType::kF16, kInputs, kVariant>;
      case DType::kBF16: return &concat_simd_impl<2, DType::kBF16, kInputs, kVariant>;
      default: return nullptr;
    }
  }
}

template <Variant kVariant>
KernelFn concat_for(DType t, int inputs) {
  switch (inputs) {
    case 2: return concat_for<2, kVariant>(t);
    case 3: return concat_for<3, kVariant>(t);
    case 4: return concat_for<4, kVariant>(t);
    case 5: return concat_for<5, kVariant>(t);
    case 6: return concat_for<6, kVariant>(t);
    case 7: return concat_for<7, kVariant>(t);
    default: return nullptr;
  }
}

template <Variant kVariant>
KernelFn transpose_for(DType t) {
  if constexpr (kVariant == Variant::kRef) {
    switch (t) {
      case DType::kF32: return &transpose_kernel_impl<4, DType::kF32>;
      case DType::kI32: return &transpose_kernel_impl<4, DType::kI32>;
      case DType::kF16: return &transpose_kernel_impl<2, DType::kF16>;
      case DType::kBF16: return &transpose_kernel_impl<2, DType::kBF16>;
      default: return nullptr;
    }
  } else {
    switch (t) {
      case DType::kF32: return &transpose_simd_impl<4, DType::kF32, kVariant>;
      case DType::kI32: return &transpose_simd_impl<4, DType::kI32, kVariant>;
      case DType::kF16: return &transpose_simd_impl<2, DType::kF16, kVariant>;
      case DType::kBF16: return &transpose_simd_impl<2, DType::kBF16, kVariant>;
      default: return nullptr;
    }
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

KernelFn transpose_kernel(DType t, Variant variant) {
  switch (variant) {
    case Variant::kRef: return transpose_for<Variant::kRef>(t);
    case Variant::kAvx2: return transpose_for<Variant::kAvx2>(t);
    case Variant::kAvx512: return nullptr;
  }
  return nullptr;
}

KernelFn concat_kernel(DType t, int inputs, Variant variant) {
  switch (variant) {
    case Variant::kRef: return concat_for<Variant::kRef>(t, inputs);
    case Variant::kAvx2: return concat_for<Variant::kAvx2>(t, inputs);
    case Variant::kAvx512: return nullptr;
  }
  return nullptr;
}

}  // namespace switchyard::cpu
