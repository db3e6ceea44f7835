// Portable kernels on block-quantized operands, and the checks of a quantized
// matmul call. See quant_kernels.h.
#include "backends/cpu/quant/quant_kernels.h"

#include <vector>

#include "backends/cpu/operand_checks.h"
#include "switchyard/half.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

// Weight rows per parallel task: a decode row costs K multiply-adds per
// activation row, so a few rows amortise the scheduling.
constexpr std::int64_t kWeightRowGrain = 4;

void store_converted(std::byte* dst, DType to, std::int64_t i, float v) {
  switch (to) {
    case DType::kF32: reinterpret_cast<float*>(dst)[i] = v; return;
    case DType::kF16: reinterpret_cast<std::uint16_t*>(dst)[i] = f32_to_f16(v); return;
    case DType::kBF16: reinterpret_cast<std::uint16_t*>(dst)[i] = f32_to_bf16(v); return;
    default: SWITCHYARD_CHECK_MSG(false, "store_converted: not a float dtype");
  }
}

bool is_dequant_target(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

}  // namespace

Result<QuantMatmulArgs> check_quant_matmul(const KernelCall& call, DType w_dtype) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 2, 1, call.name));
  const TensorView& a = call.inputs[0];
  const TensorView& w = call.inputs[1];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(a, DType::kF32, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(w, w_dtype, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, DType::kF32, call.name));
  for (const TensorView* t : {&a, &out}) {
    if (t->rank() < 2 || !t->is_contiguous()) {
      return invalid_argument_error(
          fmt::format("{}: activations and output must be contiguous with rank >= 2, got {}",
                      call.name, describe(*t)));
    }
  }
  if (w.rank() != 2 || !w.is_contiguous()) {
    return invalid_argument_error(
        fmt::format("{}: quantized weights must be a contiguous [N, K] matrix, got {}", call.name,
                    describe(w)));
  }
  QuantMatmulArgs args;
  args.k = a.shape().inner();
  args.n = w.dim(0);
  args.rows = a.shape().outer();
  bool leading_match = a.rank() == out.rank();
  for (int i = 0; leading_match && i + 1 < a.rank(); ++i) leading_match = a.dim(i) == out.dim(i);
  if (w.dim(1) != args.k || out.shape().inner() != args.n || !leading_match) {
    return invalid_argument_error(fmt::format(
        "{}: shapes {} x {} -> {} do not match [.., M, K] x [N, K] -> [.., M, N]", call.name,
        a.shape().to_string(), w.shape().to_string(), out.shape().to_string()));
  }
  const Result<std::int64_t> row_bytes_or = row_bytes(w_dtype, args.k);
  if (!row_bytes_or.is_ok()) {
    return invalid_argument_error(fmt::format("{}: K = {} is not a whole number of {} blocks of {}",
                                              call.name, args.k, name(w_dtype),
                                              block_elems(w_dtype)));
  }
  args.row_bytes = *row_bytes_or;
  args.a = a.first_as<const float>();
  args.w = w.first();
  args.out = out.first_as<float>();
  return args;
}

Status matmul_quant_ref(const KernelCall& call, DType w_dtype) {
  SWITCHYARD_ASSIGN_OR_RETURN(QuantMatmulArgs args, check_quant_matmul(call, w_dtype));
  call.ctx.parallel_for(args.n, kWeightRowGrain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> w_row(static_cast<std::size_t>(args.k));
    for (std::int64_t j = begin; j < end; ++j) {
      quant::dequantize_row(w_dtype, args.w + j * args.row_bytes, w_row.data(), args.k);
      for (std::int64_t r = 0; r < args.rows; ++r) {
        const float* x = args.a + r * args.k;
        float acc = 0.0f;
        for (std::int64_t p = 0; p < args.k; ++p) acc += x[p] * w_row[static_cast<std::size_t>(p)];
        args.out[r * args.n + j] = acc;
      }
    }
  });
  return Status::ok();
}

Status get_rows_quant_ref(const KernelCall& call, DType table_dtype, DType out_dtype) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 2, 1, call.name));
  const TensorView& table = call.inputs[0];
  const TensorView& idx = call.inputs[1];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(table, table_dtype, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(idx, DType::kI32, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, out_dtype, call.name));
  if (table.rank() != 2 || !table.is_contiguous() || idx.rank() != 1 || !idx.is_contiguous() ||
      out.rank() != 2 || !out.is_contiguous() || out.dim(0) != idx.dim(0) ||
      out.dim(1) != table.dim(1)) {
    return invalid_argument_error(
        fmt::format("{}: expected contiguous table [R, C], idx [N], out [N, C]; got {}, {}, {}",
                    call.name, describe(table), describe(idx), describe(out)));
  }
  const std::int64_t cols = table.dim(1);
  const Result<std::int64_t> row_bytes_or = row_bytes(table_dtype, cols);
  if (!row_bytes_or.is_ok()) {
    return invalid_argument_error(fmt::format("{}: C = {} is not a whole number of {} blocks",
                                              call.name, cols, name(table_dtype)));
  }
  const std::int64_t rb = *row_bytes_or;
  const std::int64_t rows = table.dim(0);
  const std::int32_t* ids = idx.first_as<const std::int32_t>();
  // Validate every index before writing anything, so a bad call leaves out intact.
  for (std::int64_t i = 0; i < idx.dim(0); ++i) {
    if (ids[i] < 0 || ids[i] >= rows) {
      return out_of_range_error(fmt::format("{}: index {} at position {} is outside [0, {})",
                                            call.name, ids[i], i, rows));
    }
  }
  const std::byte* src = table.first();
  std::byte* dst = out.first();
  call.ctx.parallel_for(idx.dim(0), 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t i = begin; i < end; ++i) {
      quant::dequantize_row(table_dtype, src + ids[i] * rb, row.data(), cols);
      for (std::int64_t c = 0; c < cols; ++c) {
        store_converted(dst, out_dtype, i * cols + c, row[static_cast<std::size_t>(c)]);
      }
    }
  });
  return Status::ok();
}

Status cast_quant_ref(const KernelCall& call, DType from, DType to) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 1, 1, call.name));
  const TensorView& in = call.inputs[0];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(in, from, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, to, call.name));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(in, out, call.name));
  if (!is_dequant_target(to) || !in.is_contiguous() || !out.is_contiguous()) {
    return invalid_argument_error(
        fmt::format("{}: operands must be contiguous and the target f32, f16 or bf16", call.name));
  }
  const std::int64_t numel = in.numel();
  if (numel % block_elems(from) != 0) {
    return invalid_argument_error(fmt::format("{}: {} elements are not whole {} blocks of {}",
                                              call.name, numel, name(from), block_elems(from)));
  }
  const std::int64_t blocks = numel / block_elems(from);
  const std::byte* src = in.first();
  std::byte* dst = out.first();
  call.ctx.parallel_for(blocks, 64, [&](std::int64_t begin, std::int64_t end) {
    float tmp[quant::kQKK];
    const std::int64_t be = block_elems(from);
    for (std::int64_t b = begin; b < end; ++b) {
      quant::dequantize_row(from, src + b * block_bytes(from), tmp, be);
      for (std::int64_t j = 0; j < be; ++j) store_converted(dst, to, b * be + j, tmp[j]);
    }
  });
  return Status::ok();
}

DType activation_format(DType w) {
  switch (w) {
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
    case DType::kIQ4_XS: return DType::kQ8_K;
    default: return DType::kQ8_0;
  }
}

}  // namespace switchyard::cpu
