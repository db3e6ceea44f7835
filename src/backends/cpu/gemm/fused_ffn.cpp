// ffn_swiglu as one kernel: out = (silu(x·gateᵀ) ⊙ (x·upᵀ)) · downᵀ.
//
// Rows of x are taken in blocks of kRowBlock. For a block, one GEMM computes the
// gate and up projections together: its weight operand is virtual, gate panel p and
// up panel p packed next to each other, so when a block of output columns is
// finished its epilogue holds g and u for the same hidden units and writes
// h = silu(g) · u straight into the hidden buffer. Neither projection is ever stored
// whole; only rows x F of h exist, and the down GEMM reads them in place.
// A single row goes through the matvec kernels (packing the weights for one row
// would cost more than the product).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/gemm/dense_kernels.h"
#include "backends/cpu/gemm/gemm.h"
#include "backends/cpu/gemm/gemm_support.h"
#include "backends/cpu/operand_checks.h"

namespace switchyard::cpu {
namespace {

// Rows per block: the hidden buffer is kRowBlock x F floats (14 MiB at F = 14336),
// and each block re-packs the weights, which 256 rows of products amortise.
constexpr std::int64_t kRowBlock = 256;

float silu(float v) { return v / (1.0f + std::exp(-v)); }

struct FfnDims {
  std::int64_t rows;
  std::int64_t d;
  std::int64_t f;
};

Result<FfnDims> check_ffn(const KernelCall& call, DType wt) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 4, 1, call.name));
  const TensorView& x = call.inputs[0];
  const TensorView& gate = call.inputs[1];
  const TensorView& up = call.inputs[2];
  const TensorView& down = call.inputs[3];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(x, DType::kF32, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, DType::kF32, call.name));
  for (const TensorView* w : {&gate, &up, &down}) {
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(*w, wt, call.name));
  }
  for (const TensorView* t : {&x, &gate, &up, &down, &out}) {
    if (!t->is_contiguous()) {
      return invalid_argument_error(
          fmt::format("{}: operands must be contiguous, got {}", call.name, describe(*t)));
    }
  }
  const std::int64_t d = x.shape().inner();
  const std::int64_t f = gate.rank() == 2 ? gate.dim(0) : -1;
  const bool ok = x.rank() >= 1 && gate.rank() == 2 && gate.dim(1) == d && up.rank() == 2 &&
                  up.dim(0) == f && up.dim(1) == d && down.rank() == 2 && down.dim(0) == d &&
                  down.dim(1) == f && out.shape() == x.shape();
  if (!ok) {
    return invalid_argument_error(fmt::format(
        "{}: shapes x {}, gate {}, up {}, down {} -> {} do not match [.., D], [F, D], [F, D], "
        "[D, F] -> [.., D]",
        call.name, x.shape().to_string(), gate.shape().to_string(), up.shape().to_string(),
        down.shape().to_string(), out.shape().to_string()));
  }
  return FfnDims{x.shape().outer(), d, f};
}

const GemmKernels& gemm_kernels_for(Isa isa, std::int64_t rows) {
  return *(isa == Isa::kAvx512 ? gemm_kernels_avx512(rows) : gemm_kernels_avx2());
}
const MatvecKernels& matvec_kernels_for(Isa isa) {
  if (isa == Isa::kAvx2) return *matvec_kernels_avx2();
  return *(cpu_features().avx512_bf16 ? matvec_kernels_avx512() : matvec_kernels_avx512_no_bf16());
}

void ffn_single_row(const KernelCall& call, Isa isa, DType wt, const FfnDims& dims) {
  const MatvecFn mv = matvec_kernels_for(isa).by_weight[float_storage_index(wt)];
  const float* x = call.inputs[0].first_as<const float>();
  const void* gate = call.inputs[1].first();
  const void* up = call.inputs[2].first();
  const void* down = call.inputs[3].first();
  float* out = call.outputs[0].first_as<float>();
  std::vector<float> g(static_cast<std::size_t>(dims.f));
  std::vector<float> u(static_cast<std::size_t>(dims.f));
  call.ctx.parallel_for(dims.f, 64, [&](std::int64_t n0, std::int64_t n1) {
    mv(x, gate, dims.d, dims.d, n0, n1, g.data());
    mv(x, up, dims.d, dims.d, n0, n1, u.data());
    for (std::int64_t i = n0; i < n1; ++i) g[i] = silu(g[i]) * u[i];
  });
  call.ctx.parallel_for(dims.d, 64, [&](std::int64_t n0, std::int64_t n1) {
    mv(g.data(), down, dims.f, dims.f, n0, n1, out);
  });
}

void ffn_blocked(const KernelCall& call, Isa isa, DType wt, const FfnDims& dims) {
  const GemmKernels& kn = gemm_kernels_for(isa, dims.rows);
  const std::int64_t nr = kn.nr;
  const std::int64_t f_panels = (dims.f + nr - 1) / nr;
  const auto* x = call.inputs[0].first_as<const float>();
  const std::byte* gate = call.inputs[1].first();
  const std::byte* up = call.inputs[2].first();
  float* out = call.outputs[0].first_as<float>();
  const int fw = float_storage_index(wt);
  const std::int64_t w_elem = float_bytes(wt);
  const std::int64_t block = std::min(kRowBlock, dims.rows);
  std::vector<float> h(static_cast<std::size_t>(block * dims.f));

  // Virtual weight panel q is gate panel q / 2 (even q) or up panel q / 2 (odd q).
  auto pack_gate_up = [&](std::int64_t n0, std::int64_t rows, std::int64_t k0, std::int64_t kc,
                          float* dst) {
    for (std::int64_t q = n0 / nr; q * nr < n0 + rows; ++q) {
      const std::byte* src = (q % 2 == 0) ? gate : up;
      const std::int64_t f0 = (q / 2) * nr;
      const std::int64_t count = std::min(nr, dims.f - f0);
      kn.pack_b[fw](src + f0 * dims.d * w_elem, dims.d, count, k0, kc,
                    dst + (q - n0 / nr) * nr * kc);
    }
  };
  const PackBlockFn pack_b(pack_gate_up);

  for (std::int64_t t0 = 0; t0 < dims.rows; t0 += block) {
    const std::int64_t rows = std::min(block, dims.rows - t0);
    auto swiglu = [&](std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1,
                      const float* c, std::int64_t ldc) {
      for (std::int64_t q = n0 / nr; q * nr < n1; q += 2) {
        const std::int64_t col = q * nr - n0;  // gate panel's column within c
        const std::int64_t f0 = (q / 2) * nr;
        const std::int64_t count = std::min(nr, dims.f - f0);
        for (std::int64_t r = m0; r < m1; ++r) {
          const float* gv = c + (r - m0) * ldc + col;
          float* hv = h.data() + r * dims.f + f0;
          for (std::int64_t j = 0; j < count; ++j) hv[j] = silu(gv[j]) * gv[j + nr];
        }
      }
    };
    const EpilogueFn epilogue(swiglu);
    const GemmProblem gate_up{.m = rows,
                              .n = 2 * f_panels * nr,
                              .k = dims.d,
                              .a = {x + t0 * dims.d, DType::kF32, dims.d},
                              .b = {nullptr, wt, dims.d},
                              .pack_b = &pack_b,
                              .epilogue = &epilogue,
                              .panel_align = 2};
    run_gemm(kn, gate_up, call.ctx);
    const GemmProblem down{.m = rows,
                           .n = dims.d,
                           .k = dims.f,
                           .a = {h.data(), DType::kF32, dims.f},
                           .b = {call.inputs[3].first(), wt, dims.f},
                           .c = out + t0 * dims.d,
                           .ldc = dims.d};
    run_gemm(kn, down, call.ctx);
  }
}

}  // namespace

template <Isa I, DType W>
Status ffn_swiglu_fused(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(const FfnDims dims, check_ffn(call, W));
  if (dims.rows == 0) return Status::ok();
  if (dims.rows == 1) {
    ffn_single_row(call, I, W, dims);
  } else {
    ffn_blocked(call, I, W, dims);
  }
  return Status::ok();
}

CostEstimate ffn_swiglu_cost(const CostInputs& in) {
  if (in.shapes.size() < 4) return {.flops = 0, .bytes = 0, .overhead_ns = 0};
  const double d = static_cast<double>(in.shapes[0].inner());
  const double rows = d > 0 ? static_cast<double>(in.shapes[0].numel()) / d : 0;
  const double f = in.shapes[1].rank() == 2 ? static_cast<double>(in.shapes[1][0]) : 0;
  double bytes = 0;
  for (std::size_t i = 0; i < in.shapes.size() && i < in.dtypes.size(); ++i) {
    bytes += static_cast<double>(in.shapes[i].numel()) * element_bytes(in.dtypes[i]);
  }
  return {.flops = 6.0 * rows * d * f, .bytes = bytes, .overhead_ns = 2000.0};
}

template Status ffn_swiglu_fused<Isa::kAvx2, DType::kF32>(const KernelCall&);
template Status ffn_swiglu_fused<Isa::kAvx2, DType::kF16>(const KernelCall&);
template Status ffn_swiglu_fused<Isa::kAvx2, DType::kBF16>(const KernelCall&);
template Status ffn_swiglu_fused<Isa::kAvx512, DType::kF32>(const KernelCall&);
template Status ffn_swiglu_fused<Isa::kAvx512, DType::kF16>(const KernelCall&);
template Status ffn_swiglu_fused<Isa::kAvx512, DType::kBF16>(const KernelCall&);

}  // namespace switchyard::cpu
