// The blocked GEMM driver (see gemm.h) and the matmul / linear entry points that
// use it or the matvec kernels. Portable code: everything ISA-specific is reached
// through the GemmKernels / MatvecKernels tables after a CPU-feature check.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/dense_kernels.h"
#include "backends/cpu/gemm/gemm.h"
#include "backends/cpu/gemm/gemm_support.h"
#include "backends/cpu/operand_checks.h"
#include "switchyard/half.h"

namespace switchyard::cpu {
namespace {

// Columns of the f32 scratch that accumulates a block when the output is not
// written directly (f16/bf16 outputs, ffn_swiglu): rows x 1024 floats per thread.
constexpr std::int64_t kScratchCols = 1024;
// The largest micro-kernel tile, for the partial-tile buffer.
constexpr int kMaxTile = 14 * 32;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A per-thread, 64-byte aligned float buffer (the micro-kernels load weight panels
// aligned); one per Slot and thread, grown once and reused by later calls.
template <int Slot>
float* thread_buffer(std::int64_t count) {
  thread_local std::vector<float> storage;
  const auto need = static_cast<std::size_t>(count + 16);
  if (storage.size() < need) storage.resize(need);
  const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
  return reinterpret_cast<float*>((address + 63) & ~std::uintptr_t{63});
}

// The output region one thread owns: rows [m0, m1), columns [n0, n1).
struct Region {
  std::int64_t m0, m1, n0, n1;
};

// The BLIS loop nest over one region, with the thread's own packed buffers.
void gemm_region(const GemmKernels& kn, const GemmProblem& p, const Region& region) {
  const std::int64_t mr = kn.mr, nr = kn.nr, mc = kn.mc, kc = kn.kc;
  const bool direct = p.c != nullptr;
  const std::int64_t nc = direct ? kn.nc : std::min(kn.nc, kScratchCols);
  const std::int64_t k_blocks = std::max<std::int64_t>(1, ceil_div(p.k, kc));
  const int fa = float_storage_index(p.a.dtype);
  const int fb = float_storage_index(p.b.dtype);
  const auto* a_bytes = static_cast<const std::byte*>(p.a.data);
  const auto* b_bytes = static_cast<const std::byte*>(p.b.data);
  const std::int64_t a_elem = float_bytes(p.a.dtype);
  const std::int64_t b_elem = fb >= 0 ? float_bytes(p.b.dtype) : 0;

  float* pb = thread_buffer<0>(kc * nc);
  float* pa = thread_buffer<1>(mc * kc);
  float* scratch = direct ? nullptr : thread_buffer<2>((region.m1 - region.m0) * nc);
  alignas(64) float tile[kMaxTile];

  for (std::int64_t jc = region.n0; jc < region.n1; jc += nc) {
    const std::int64_t ncb = std::min(nc, region.n1 - jc);
    // C for this column block: the output itself, or the scratch, whose row 0 is
    // the region's first row.
    float* c_origin = direct ? p.c + jc : scratch;
    const std::int64_t c_row0 = direct ? 0 : region.m0;
    const std::int64_t ldc = direct ? p.ldc : nc;
    for (std::int64_t kb = 0; kb < k_blocks; ++kb) {
      const std::int64_t k0 = kb * kc;
      const std::int64_t kcb = std::min(kc, p.k - k0);
      const bool accumulate = kb > 0;
      if (p.pack_b != nullptr) {
        (*p.pack_b)(jc, ncb, k0, kcb, pb);
      } else {
        kn.pack_b[fb](b_bytes + jc * p.b.ld * b_elem, p.b.ld, ncb, k0, kcb, pb);
      }
      for (std::int64_t ic = region.m0; ic < region.m1; ic += mc) {
        const std::int64_t mcb = std::min(mc, region.m1 - ic);
        kn.pack_a[fa](a_bytes + ic * p.a.ld * a_elem, p.a.ld, mcb, k0, kcb, pa);
        for (std::int64_t jr = 0; jr < ncb; jr += nr) {
          const std::int64_t cols = std::min(nr, ncb - jr);
          const float* b_panel = pb + jr * kcb;
          for (std::int64_t ir = 0; ir < mcb; ir += mr) {
            const std::int64_t rows = std::min(mr, mcb - ir);
            const float* a_panel = pa + ir * kcb;
            float* c = c_origin + (ic + ir - c_row0) * ldc + jr;
            if (rows == mr && cols == nr) {
              kn.micro(kcb, a_panel, b_panel, c, ldc, accumulate);
              continue;
            }
            // Edge tile: the same micro-kernel into a buffer, then the same addition
            // into C, so edge elements round exactly as interior ones do.
            kn.micro(kcb, a_panel, b_panel, tile, nr, false);
            for (std::int64_t r = 0; r < rows; ++r) {
              for (std::int64_t j = 0; j < cols; ++j) {
                float& dst = c[r * ldc + j];
                dst = accumulate ? dst + tile[r * nr + j] : tile[r * nr + j];
              }
            }
          }
        }
        if (kb + 1 == k_blocks && p.epilogue != nullptr) {
          (*p.epilogue)(ic, ic + mcb, jc, jc + ncb, c_origin + (ic - c_row0) * ldc, ldc);
        }
      }
    }
  }
}

}  // namespace

// Threads split the output into a grid of regions, one per thread, each running
// the whole loop nest with its own packing: one fork-join per call (a shared packed
// block would need a barrier per K block, and wake-ups are what a loaded machine
// makes slow). Splitting columns makes every thread pack all of a; splitting rows,
// all of w; the grid is chosen to pack the least.
void run_gemm(const GemmKernels& kn, const GemmProblem& p, const ExecContext& ctx) {
  const std::int64_t m = p.m, n = p.n;
  if (m == 0 || n == 0) return;
  SWITCHYARD_CHECK(float_storage_index(p.a.dtype) >= 0);
  SWITCHYARD_CHECK(p.pack_b != nullptr || float_storage_index(p.b.dtype) >= 0);
  SWITCHYARD_CHECK(p.c != nullptr || p.epilogue != nullptr);
  const std::int64_t unit = kn.nr * std::max(p.panel_align, 1);
  // Every kernel set's nc and kScratchCols are multiples of 2 * nr.
  SWITCHYARD_CHECK(kn.nc % unit == 0 && kScratchCols % unit == 0);
  SWITCHYARD_CHECK(kn.mr * kn.nr <= kMaxTile && kn.mc % kn.mr == 0);
  const std::int64_t a_panels = ceil_div(m, kn.mr);
  const std::int64_t col_units = ceil_div(n, unit);
  const std::int64_t threads = ctx.num_threads();
  // The grid with the most regions (at most one per thread), then the least packing.
  std::int64_t tr = 0, tc = 0;
  double best = 0;
  for (std::int64_t r = 1; r <= std::min(threads, a_panels); ++r) {
    const std::int64_t c = std::min(threads / r, col_units);
    const double packing = static_cast<double>(c * m + r * n);
    if (r * c > tr * tc || (r * c == tr * tc && packing < best)) {
      tr = r;
      tc = c;
      best = packing;
    }
  }
  ctx.parallel_for(tr * tc, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t r = item / tc, c = item % tc;
      const Region region{.m0 = (r * a_panels / tr) * kn.mr,
                          .m1 = std::min(((r + 1) * a_panels / tr) * kn.mr, m),
                          .n0 = (c * col_units / tc) * unit,
                          .n1 = std::min(((c + 1) * col_units / tc) * unit, n)};
      if (region.m0 < region.m1 && region.n0 < region.n1) gemm_region(kn, p, region);
    }
  });
}

// --- shared checks and costs ------------------------------------------------------

Result<MatmulDims> check_matmul(const KernelCall& call, DType at, DType wt, DType ot) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 2, 1, call.name));
  const TensorView& a = call.inputs[0];
  const TensorView& w = call.inputs[1];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(a, at, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(w, wt, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, ot, call.name));
  for (const TensorView* t : {&a, &w, &out}) {
    if (t->rank() < 2 || !t->is_contiguous()) {
      return invalid_argument_error(fmt::format(
          "{}: operands must be contiguous with rank >= 2, got {}", call.name, describe(*t)));
    }
  }
  MatmulDims d;
  d.k = a.shape().inner();
  d.m = a.dim(a.rank() - 2);
  d.n = w.dim(w.rank() - 2);
  d.shared_weights = w.rank() == 2;
  bool ok = w.shape().inner() == d.k && out.rank() == a.rank() && out.shape().inner() == d.n &&
            out.dim(out.rank() - 2) == d.m && (d.shared_weights || w.rank() == a.rank());
  for (int i = 0; ok && i + 2 < a.rank(); ++i) {
    d.batch *= a.dim(i);
    ok = out.dim(i) == a.dim(i) && (d.shared_weights || w.dim(i) == a.dim(i));
  }
  if (!ok) {
    return invalid_argument_error(fmt::format(
        "{}: shapes {} x {} -> {} do not match [.., M, K] x [N, K] or [.., N, K] -> [.., M, N]",
        call.name, a.shape().to_string(), w.shape().to_string(), out.shape().to_string()));
  }
  return d;
}

namespace {

struct CostDims {
  double rows = 0;  // activation rows (batch * M)
  double n = 0;
  double k = 0;
  double weight_matrices = 1;
};

CostDims cost_dims(const CostInputs& in) {
  CostDims d;
  if (in.shapes.size() < 2) return d;
  const Shape& a = in.shapes[0];
  const Shape& w = in.shapes[1];
  d.k = static_cast<double>(a.inner());
  d.rows = d.k > 0 ? static_cast<double>(a.numel()) / d.k : static_cast<double>(a.outer());
  d.n = w.rank() >= 2 ? static_cast<double>(w[w.rank() - 2]) : 0;
  d.weight_matrices = w.rank() > 2 ? static_cast<double>(w.outer()) / std::max(d.n, 1.0) : 1.0;
  return d;
}

double operand_bytes(const CostInputs& in) {
  double bytes = 0;
  for (std::size_t i = 0; i < in.shapes.size() && i < in.dtypes.size(); ++i) {
    bytes += static_cast<double>(in.shapes[i].numel()) * element_bytes(in.dtypes[i]);
  }
  return bytes;
}

}  // namespace

CostEstimate gemm_cost(const CostInputs& in) {
  const CostDims d = cost_dims(in);
  // The weights are packed as f32: written once and read back once per row block.
  const double packed = 8.0 * d.n * d.k * d.weight_matrices;
  return {.flops = 2.0 * d.rows * d.n * d.k,
          .bytes = operand_bytes(in) + packed,
          .overhead_ns = 2000.0};
}

CostEstimate matvec_cost(const CostInputs& in) {
  const CostDims d = cost_dims(in);
  const double weight_bytes =
      in.dtypes.size() > 1 ? d.n * d.k * d.weight_matrices * element_bytes(in.dtypes[1]) : 0;
  // Every activation row beyond one per weight matrix streams the weights again.
  const double extra_rows = std::max(0.0, d.rows - d.weight_matrices);
  return {.flops = 2.0 * d.rows * d.n * d.k,
          .bytes = operand_bytes(in) + extra_rows * weight_bytes,
          .overhead_ns = 500.0};
}

bool admits_single_row(std::span<const Shape> shapes) {
  if (shapes.size() < 2 || shapes[0].rank() < 1 || shapes[1].rank() < 2) return false;
  const Shape& a = shapes[0];
  const Shape& w = shapes[1];
  const std::int64_t rows = a.inner() > 0 ? a.numel() / a.inner() : a.outer();
  const std::int64_t matrices = w.outer() / std::max<std::int64_t>(w[w.rank() - 2], 1);
  return rows == matrices || rows == 1;
}

// --- matmul entries ---------------------------------------------------------------

namespace {

const GemmKernels& gemm_kernels(Isa isa, std::int64_t rows) {
  return *(isa == Isa::kAvx512 ? gemm_kernels_avx512(rows) : gemm_kernels_avx2());
}

const MatvecKernels& matvec_kernels(Isa isa) {
  if (isa == Isa::kAvx2) return *matvec_kernels_avx2();
  return *(cpu_features().avx512_bf16 ? matvec_kernels_avx512() : matvec_kernels_avx512_no_bf16());
}

// Writes an f32 block into an output of dtype `out` (f32, f16 or bf16), adding the
// bias per column when given. Rounds once.
void store_block(const float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols,
                 const float* bias, DType out, std::byte* dst, std::int64_t ldo) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* src = c + r * ldc;
    for (std::int64_t j = 0; j < cols; ++j) {
      const float v = bias != nullptr ? src[j] + bias[j] : src[j];
      store_float(out, dst, r * ldo + j, v);
    }
  }
}

struct DenseCall {
  std::int64_t rows;  // activation rows per weight matrix
  std::int64_t n;
  std::int64_t k;
  std::int64_t matrices;  // 1 when the weights are shared
  const std::byte* a;
  const std::byte* w;
  std::byte* out;
  const float* bias;  // null for matmul
};

Status run_dense_gemm(const KernelCall& call, Isa isa, DType at, DType wt, DType ot,
                      const DenseCall& d) {
  const GemmKernels& kn = gemm_kernels(isa, d.rows);
  const std::int64_t a_stride = d.rows * d.k * float_bytes(at);
  const std::int64_t w_stride = d.n * d.k * float_bytes(wt);
  const std::int64_t o_stride = d.rows * d.n * float_bytes(ot);
  for (std::int64_t b = 0; b < d.matrices; ++b) {
    std::byte* out = d.out + b * o_stride;
    auto finish = [&](std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1,
                      const float* c, std::int64_t ldc) {
      if (ot == DType::kF32) {
        // Written in place: only the bias is left to add.
        if (d.bias == nullptr) return;
        for (std::int64_t r = m0; r < m1; ++r) {
          float* row = const_cast<float*>(c) + (r - m0) * ldc;
          for (std::int64_t j = n0; j < n1; ++j) row[j - n0] += d.bias[j];
        }
        return;
      }
      store_block(c, ldc, m1 - m0, n1 - n0, d.bias ? d.bias + n0 : nullptr, ot,
                  out + (m0 * d.n + n0) * float_bytes(ot), d.n);
    };
    const EpilogueFn epilogue(finish);
    GemmProblem p{.m = d.rows,
                  .n = d.n,
                  .k = d.k,
                  .a = {d.a + b * a_stride, at, d.k},
                  .b = {d.w + b * w_stride, wt, d.k},
                  .c = ot == DType::kF32 ? reinterpret_cast<float*>(out) : nullptr,
                  .ldc = d.n,
                  .epilogue = (ot != DType::kF32 || d.bias != nullptr) ? &epilogue : nullptr};
    run_gemm(kn, p, call.ctx);
  }
  return Status::ok();
}

Status run_dense_matvec(const KernelCall& call, Isa isa, DType at, DType wt, DType ot,
                        const DenseCall& d) {
  const MatvecKernels& mv = matvec_kernels(isa);
  const bool bf16_dot = at == DType::kBF16 && wt == DType::kBF16 && mv.bf16_bf16 != nullptr;
  const MatvecFn fn = mv.by_weight[float_storage_index(wt)];
  const std::int64_t a_elem = float_bytes(at);
  const std::int64_t w_stride = d.n * d.k * float_bytes(wt);
  std::vector<float> x(at == DType::kF32 ? 0 : static_cast<std::size_t>(d.k));
  std::vector<float> y(ot == DType::kF32 && d.bias == nullptr ? 0 : static_cast<std::size_t>(d.n));
  for (std::int64_t b = 0; b < d.matrices; ++b) {
    const std::byte* w = d.w + b * w_stride;
    for (std::int64_t r = 0; r < d.rows; ++r) {
      const std::int64_t row = b * d.rows + r;
      const std::byte* a = d.a + row * d.k * a_elem;
      float* dst = y.empty() ? reinterpret_cast<float*>(d.out) + row * d.n : y.data();
      const float* xf = reinterpret_cast<const float*>(a);
      if (at != DType::kF32 && !bf16_dot) {
        for (std::int64_t i = 0; i < d.k; ++i)
          x[static_cast<std::size_t>(i)] = load_float(at, a, i);
        xf = x.data();
      }
      // Rows of 64 weights per chunk at least: each chunk streams 64 * K values.
      call.ctx.parallel_for(d.n, 64, [&](std::int64_t n0, std::int64_t n1) {
        if (bf16_dot) {
          mv.bf16_bf16(reinterpret_cast<const std::uint16_t*>(a),
                       reinterpret_cast<const std::uint16_t*>(w), d.k, d.k, n0, n1, dst);
        } else {
          fn(xf, w, d.k, d.k, n0, n1, dst);
        }
      });
      if (!y.empty()) {
        store_block(y.data(), d.n, 1, d.n, d.bias, ot, d.out + row * d.n * float_bytes(ot), d.n);
      }
    }
  }
  return Status::ok();
}

Result<DenseCall> matmul_call(const KernelCall& call, DType at, DType wt, DType ot) {
  SWITCHYARD_ASSIGN_OR_RETURN(const MatmulDims dims, check_matmul(call, at, wt, ot));
  DenseCall d{.rows = dims.shared_weights ? dims.batch * dims.m : dims.m,
              .n = dims.n,
              .k = dims.k,
              .matrices = dims.shared_weights ? 1 : dims.batch,
              .a = call.inputs[0].first(),
              .w = call.inputs[1].first(),
              .out = call.outputs[0].first(),
              .bias = nullptr};
  return d;
}

Result<DenseCall> linear_call(const KernelCall& call, DType wt) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 3, 1, call.name));
  const TensorView& x = call.inputs[0];
  const TensorView& w = call.inputs[1];
  const TensorView& bias = call.inputs[2];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(x, DType::kF32, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(w, wt, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(bias, DType::kF32, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, DType::kF32, call.name));
  for (const TensorView* t : {&x, &w, &bias, &out}) {
    if (!t->is_contiguous()) {
      return invalid_argument_error(
          fmt::format("{}: operands must be contiguous, got {}", call.name, describe(*t)));
    }
  }
  const std::int64_t k = x.shape().inner();
  const bool ok = x.rank() >= 1 && w.rank() == 2 && w.dim(1) == k && bias.rank() == 1 &&
                  bias.dim(0) == w.dim(0) && out.rank() == x.rank() &&
                  out.shape().inner() == w.dim(0) && out.numel() == x.shape().outer() * w.dim(0) &&
                  [&] {
                    for (int i = 0; i + 1 < x.rank(); ++i) {
                      if (out.dim(i) != x.dim(i)) return false;
                    }
                    return true;
                  }();
  if (!ok) {
    return invalid_argument_error(
        fmt::format("{}: shapes x {} , w {}, bias {} -> {} do not match [.., K] x [N, K] + [N] "
                    "-> [.., N]",
                    call.name, x.shape().to_string(), w.shape().to_string(),
                    bias.shape().to_string(), out.shape().to_string()));
  }
  return DenseCall{.rows = x.shape().outer(),
                   .n = w.dim(0),
                   .k = k,
                   .matrices = 1,
                   .a = x.first(),
                   .w = w.first(),
                   .out = out.first(),
                   .bias = bias.first_as<const float>()};
}

}  // namespace

template <Isa I, DType A, DType W, DType O>
Status matmul_gemm(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(const DenseCall d, matmul_call(call, A, W, O));
  return run_dense_gemm(call, I, A, W, O, d);
}

template <Isa I, DType A, DType W, DType O>
Status matmul_matvec(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(const DenseCall d, matmul_call(call, A, W, O));
  return run_dense_matvec(call, I, A, W, O, d);
}

template <Isa I, DType W>
Status linear_gemm(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(const DenseCall d, linear_call(call, W));
  return run_dense_gemm(call, I, DType::kF32, W, DType::kF32, d);
}

template <Isa I, DType W>
Status linear_matvec(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(const DenseCall d, linear_call(call, W));
  return run_dense_matvec(call, I, DType::kF32, W, DType::kF32, d);
}

#define SWITCHYARD_DENSE_INSTANTIATE(isa)                                                          \
  template Status matmul_gemm<isa, DType::kF32, DType::kF32, DType::kF32>(const KernelCall&);      \
  template Status matmul_gemm<isa, DType::kF32, DType::kF16, DType::kF32>(const KernelCall&);      \
  template Status matmul_gemm<isa, DType::kF32, DType::kBF16, DType::kF32>(const KernelCall&);     \
  template Status matmul_gemm<isa, DType::kF16, DType::kF16, DType::kF16>(const KernelCall&);      \
  template Status matmul_gemm<isa, DType::kBF16, DType::kBF16, DType::kBF16>(const KernelCall&);   \
  template Status matmul_matvec<isa, DType::kF32, DType::kF32, DType::kF32>(const KernelCall&);    \
  template Status matmul_matvec<isa, DType::kF32, DType::kF16, DType::kF32>(const KernelCall&);    \
  template Status matmul_matvec<isa, DType::kF32, DType::kBF16, DType::kF32>(const KernelCall&);   \
  template Status matmul_matvec<isa, DType::kF16, DType::kF16, DType::kF16>(const KernelCall&);    \
  template Status matmul_matvec<isa, DType::kBF16, DType::kBF16, DType::kBF16>(const KernelCall&); \
  template Status linear_gemm<isa, DType::kF32>(const KernelCall&);                                \
  template Status linear_gemm<isa, DType::kF16>(const KernelCall&);                                \
  template Status linear_gemm<isa, DType::kBF16>(const KernelCall&);                               \
  template Status linear_matvec<isa, DType::kF32>(const KernelCall&);                              \
  template Status linear_matvec<isa, DType::kF16>(const KernelCall&);                              \
  template Status linear_matvec<isa, DType::kBF16>(const KernelCall&);

SWITCHYARD_DENSE_INSTANTIATE(Isa::kAvx2)
SWITCHYARD_DENSE_INSTANTIATE(Isa::kAvx512)
#undef SWITCHYARD_DENSE_INSTANTIATE

}  // namespace switchyard::cpu
