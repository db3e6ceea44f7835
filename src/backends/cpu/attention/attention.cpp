// attention: the double-precision reference and the f32 SIMD siblings (the rows
// are in attention_simd.inl). Both split work into items fixed by the shapes, never
// by the thread count, so results are the same bytes on any number of threads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/attention/attention.h"
#include "backends/cpu/q8_0_rows.h"
#include "backends/cpu/simd_rows.h"

namespace switchyard::cpu {
namespace {

// The operands of one attention call, checked against the contract.
struct AttentionShape {
  std::int64_t sq = 0, heads = 0, dh = 0, skv = 0, kv_heads = 0;
  const void* mask = nullptr;
};

template <typename Q, typename KV, bool kMask>
Result<AttentionShape> check_attention(const KernelCall& call, std::string_view kernel) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, kMask ? 4 : 3, 1, kernel));
  const TensorView& q = call.inputs[0];
  const TensorView& k = call.inputs[1];
  const TensorView& v = call.inputs[2];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(q, kDTypeOf<Q>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(k, kDTypeOf<KV>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(v, kDTypeOf<KV>, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, kDTypeOf<Q>, kernel));
  for (const TensorView& t : call.inputs) SWITCHYARD_RETURN_IF_ERROR(check_contiguous(t, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(q, out, kernel));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(k, v, kernel));
  const int rank = q.rank();
  bool ok = rank >= 3 && k.rank() == rank;
  for (int d = 0; ok && d < rank - 3; ++d) ok = q.dim(d) == k.dim(d);
  AttentionShape s;
  s.sq = ok ? q.dim(rank - 3) : 0;
  s.heads = ok ? q.dim(rank - 2) : 0;
  s.dh = ok ? q.dim(rank - 1) : 0;
  s.skv = ok ? k.dim(rank - 3) : 0;
  s.kv_heads = ok ? k.dim(rank - 2) : 0;
  ok = ok && k.dim(rank - 1) == s.dh && s.kv_heads > 0 && s.heads % s.kv_heads == 0;
  if (!ok) {
    return invalid_argument_error(fmt::format(
        "{}: q {} and k/v {} are not [..., Sq, H, Dh] and [..., Skv, Hkv, Dh] with H divisible "
        "by Hkv",
        kernel, q.shape().to_string(), k.shape().to_string()));
  }
  if (std::is_same_v<KV, Q8_0Block> && s.dh % kQ8_0Values != 0) {
    return invalid_argument_error(
        fmt::format("{}: q8_0 keys and values need a head size that is whole blocks of {}, not {}",
                    kernel, kQ8_0Values, s.dh));
  }
  if constexpr (kMask) {
    const TensorView& mask = call.inputs[3];
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(mask, kDTypeOf<Q>, kernel));
    if (mask.rank() != 2 || mask.dim(0) != s.sq || mask.dim(1) != s.skv) {
      return invalid_argument_error(fmt::format("{}: mask must have shape [{}, {}], got {}", kernel,
                                                s.sq, s.skv, mask.shape().to_string()));
    }
    s.mask = mask.first_as<const Q>();
  }
  return s;
}

// Every value of a contiguous q8_0 tensor, in f32.
std::vector<float> dequantized(const TensorView& t) {
  std::vector<float> values(static_cast<std::size_t>(t.numel()));
  const auto* blocks = reinterpret_cast<const Q8_0Block*>(t.first());
  for (std::size_t b = 0; b < values.size() / kQ8_0Values; ++b) {
    dequantize_q8_0_block(blocks[b], values.data() + b * kQ8_0Values);
  }
  return values;
}

template <typename Q, typename KV, bool kMask>
Status attention_kernel_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  Result<AttentionShape> checked = check_attention<Q, KV, kMask>(call, kernel);
  if (!checked.is_ok()) return checked.status();
  // Plain copies, not a structured binding: lambdas below capture them.
  const std::int64_t sq = checked->sq, heads = checked->heads, dh = checked->dh;
  const std::int64_t skv = checked->skv, kv_heads = checked->kv_heads;
  const void* mask_ptr = checked->mask;
  const TensorView& q = call.inputs[0];
  const TensorView& k = call.inputs[1];
  const TensorView& v = call.inputs[2];
  const TensorView& out = call.outputs[0];
  const Q* pm = static_cast<const Q*>(mask_ptr);
  const std::int64_t group = heads / kv_heads;
  const double scale = call.params.scale;
  const bool causal = call.params.causal;
  const std::int64_t query_offset = call.params.query_offset;
  const Q* pq = q.first_as<const Q>();
  // q8_0 keys and values are read as their exact f32 values.
  using KVE = std::conditional_t<std::is_same_v<KV, Q8_0Block>, float, KV>;
  std::vector<float> k_values, v_values;
  const KVE* pk = nullptr;
  const KVE* pv = nullptr;
  if constexpr (std::is_same_v<KV, Q8_0Block>) {
    k_values = dequantized(k);
    v_values = dequantized(v);
    pk = k_values.data();
    pv = v_values.data();
  } else {
    pk = k.first_as<const KV>();
    pv = v.first_as<const KV>();
  }
  Q* po = out.first_as<Q>();
  // One task row is one (batch, query, head) output vector.
  const std::int64_t rows = q.numel() > 0 ? q.numel() / dh : 0;
  call.ctx.parallel_for(rows, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(1, skv * dh)),
                        [&](std::int64_t begin, std::int64_t end) {
                          std::vector<double> p(static_cast<std::size_t>(skv));
                          std::vector<double> acc(static_cast<std::size_t>(dh));
                          for (std::int64_t r = begin; r < end; ++r) {
                            const std::int64_t h = r % heads;
                            const std::int64_t s = (r / heads) % sq;
                            const std::int64_t b = r / (heads * sq);
                            const std::int64_t kvh = h / group;
                            const Q* qr = pq + r * dh;
                            std::int64_t valid = skv;
                            if (causal)
                              valid = std::clamp<std::int64_t>(s + query_offset + 1, 0, skv);
                            double m = -std::numeric_limits<double>::infinity();
                            for (std::int64_t j = 0; j < valid; ++j) {
                              const KVE* kr = pk + ((b * skv + j) * kv_heads + kvh) * dh;
                              double dot = 0.0;
                              for (std::int64_t e = 0; e < dh; ++e) {
                                dot += static_cast<double>(to_f32(qr[e])) * to_f32(kr[e]);
                              }
                              double logit = dot * scale;
                              if constexpr (kMask) logit += to_f32(pm[s * skv + j]);
                              p[j] = logit;
                              m = std::isnan(logit) ? logit : std::max(m, logit);
                              if (std::isnan(m)) break;
                            }
                            std::fill(acc.begin(), acc.end(), 0.0);
                            Q* orow = po + r * dh;
                            if (std::isnan(m)) {
                              // A NaN logit: the row is NaN (docs/ops.md), also
                              // when no other key is unmasked.
                              for (std::int64_t e = 0; e < dh; ++e)
                                orow[e] = from_f32<Q>(std::numeric_limits<float>::quiet_NaN());
                              continue;
                            }
                            if (valid == 0 || m == -std::numeric_limits<double>::infinity()) {
                              // Every key masked: the softmax contract gives zero weights.
                              for (std::int64_t e = 0; e < dh; ++e) orow[e] = from_f32<Q>(0.0f);
                              continue;
                            }
                            double sum = 0.0;
                            for (std::int64_t j = 0; j < valid; ++j) {
                              p[j] = std::exp(p[j] - m);
                              sum += p[j];
                              const KVE* vr = pv + ((b * skv + j) * kv_heads + kvh) * dh;
                              for (std::int64_t e = 0; e < dh; ++e) acc[e] += p[j] * to_f32(vr[e]);
                            }
                            for (std::int64_t e = 0; e < dh; ++e)
                              orow[e] = from_f32<Q>(static_cast<float>(acc[e] / sum));
                          }
                        });
  return Status::ok();
}

const AttentionSimd& attention_table(Variant v) {
  return v == Variant::kAvx512 ? attention_avx512() : attention_avx2();
}

// Query positions per work item: about 64 rows (positions times the heads that
// share one kv head), so the conversion of each key and value block into packed
// f32 rows is shared by many rows.
std::int64_t positions_per_item(std::int64_t group) {
  return std::max<std::int64_t>(1, 64 / std::max<std::int64_t>(1, group));
}

template <typename Q, typename KV, bool kMask, Variant kVariant>
Status attention_simd_impl(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  Result<AttentionShape> checked = check_attention<Q, KV, kMask>(call, kernel);
  if (!checked.is_ok()) return checked.status();
  const AttentionShape& s = *checked;
  const AttentionSimd& table = attention_table(kVariant);
  const std::int64_t group = s.heads / s.kv_heads;
  const std::int64_t rows = call.inputs[0].numel() / std::max<std::int64_t>(1, s.dh);
  if (rows == 0) return Status::ok();
  AttentionArgs args{.q = call.inputs[0].first_as<const Q>(),
                     .k = call.inputs[1].first(),
                     .v = call.inputs[2].first(),
                     .mask = s.mask,
                     .out = call.outputs[0].first_as<Q>(),
                     .sq = s.sq,
                     .skv = s.skv,
                     .heads = s.heads,
                     .kv_heads = s.kv_heads,
                     .dh = s.dh,
                     .scale = call.params.scale,
                     .causal = call.params.causal,
                     .query_offset = call.params.query_offset,
                     .positions_per_item = positions_per_item(group)};
  const std::int64_t batch = rows / (s.sq * s.heads);
  const std::int64_t items =
      batch * s.kv_heads * ((s.sq + args.positions_per_item - 1) / args.positions_per_item);
  const std::int64_t dh_pad = (s.dh + table.width - 1) / table.width * table.width;
  // Rows of an item, rounded up to whole vectors (an item of many rows keeps its
  // q transposed, a row per lane).
  const std::int64_t item_rows =
      (std::min(args.positions_per_item, s.sq) * group + table.width - 1) / table.width *
      table.width;
  // Per row: q, the sums, max / sum / keys and the block's weights; per block the
  // packed keys and values.
  const auto scratch_floats = static_cast<std::size_t>(item_rows * (2 * dh_pad + 3 + table.block) +
                                                       2 * table.block * dh_pad);
  // The mask's limits and zero rows, once per call (AttentionArgs::key_limit):
  // every kv head's items read the same rows.
  std::vector<std::int64_t> key_limit;
  std::vector<std::uint8_t> mask_zero;
  const Q* pm = static_cast<const Q*>(s.mask);
  if (pm != nullptr && !args.causal) {
    key_limit.resize(static_cast<std::size_t>(s.sq));
    mask_zero.resize(static_cast<std::size_t>(s.sq));
    call.ctx.parallel_for(s.sq, 64, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t position = begin; position < end; ++position) {
        const Q* row = pm + position * s.skv;
        std::int64_t limit = s.skv;
        while (limit > 0 && to_f32(row[limit - 1]) == -std::numeric_limits<float>::infinity()) {
          --limit;
        }
        bool zero = true;
        for (std::int64_t j = 0; j < limit && zero; ++j) zero = to_f32(row[j]) == 0.0f;
        key_limit[static_cast<std::size_t>(position)] = limit;
        mask_zero[static_cast<std::size_t>(position)] = zero ? 1 : 0;
      }
    });
    args.key_limit = key_limit.data();
    args.mask_zero = mask_zero.data();
  }
  const AttentionItemFn fn =
      std::is_same_v<KV, Q8_0Block>
          ? table.item_q8_0[static_cast<int>(kStorageOf<Q>)]
          : table.item[static_cast<int>(kStorageOf<Q>)][static_cast<int>(kStorageOf<KV>)];
  // Items per task: enough multiply-adds (~2^18, tens of microseconds) to repay
  // a hand-off to the pool; a decoding step of a small model runs on one thread.
  const std::int64_t item_work = std::max<std::int64_t>(1, item_rows * s.skv * s.dh);
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 18) / item_work);
  call.ctx.parallel_for(items, grain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> scratch(scratch_floats);
    for (std::int64_t item = begin; item < end; ++item) {
      fn(args, item, scratch.data());
    }
  });
  return Status::ok();
}

template <typename Q, typename KV, bool kMask, Variant kVariant>
KernelFn impl_of() {
  if constexpr (kVariant == Variant::kRef) {
    return &attention_kernel_impl<Q, KV, kMask>;
  } else {
    return &attention_simd_impl<Q, KV, kMask, kVariant>;
  }
}

template <typename Q, bool kMask, Variant kVariant>
KernelFn attention_for(DType kv) {
  switch (kv) {
    case DType::kF32: return impl_of<Q, float, kMask, kVariant>();
    case DType::kF16: return impl_of<Q, F16, kMask, kVariant>();
    case DType::kBF16: return impl_of<Q, BF16, kMask, kVariant>();
    case DType::kQ8_0: return impl_of<Q, Q8_0Block, kMask, kVariant>();
    default: return nullptr;
  }
}

template <bool kMask, Variant kVariant>
KernelFn attention_for(DType q, DType kv) {
  switch (q) {
    case DType::kF32: return attention_for<float, kMask, kVariant>(kv);
    case DType::kF16: return attention_for<F16, kMask, kVariant>(kv);
    case DType::kBF16: return attention_for<BF16, kMask, kVariant>(kv);
    default: return nullptr;
  }
}

template <Variant kVariant>
KernelFn attention_for(DType q, DType kv, bool with_mask) {
  return with_mask ? attention_for<true, kVariant>(q, kv) : attention_for<false, kVariant>(q, kv);
}

}  // namespace

KernelFn attention_kernel(DType q, DType kv, bool with_mask, Variant variant) {
  switch (variant) {
    case Variant::kRef: return attention_for<Variant::kRef>(q, kv, with_mask);
    case Variant::kAvx2: return attention_for<Variant::kAvx2>(q, kv, with_mask);
    case Variant::kAvx512: return attention_for<Variant::kAvx512>(q, kv, with_mask);
  }
  return nullptr;
}

}  // namespace switchyard::cpu
