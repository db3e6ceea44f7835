#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/tensor_kernels.h"

namespace switchyard::cpu {
namespace {

template <typename Q, typename KV, bool kMask>
Status attention_kernel_impl(const KernelCall& call) {
  const std::string kName = fmt::format("attention_{}_{}{}__cpu_ref", name(kDTypeOf<Q>),
                                        name(kDTypeOf<KV>), kMask ? "_mask" : "");
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, kMask ? 4 : 3, 1, kName));
  const TensorView& q = call.inputs[0];
  const TensorView& k = call.inputs[1];
  const TensorView& v = call.inputs[2];
  const TensorView& out = call.outputs[0];
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(q, kDTypeOf<Q>, kName));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(k, kDTypeOf<KV>, kName));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(v, kDTypeOf<KV>, kName));
  SWITCHYARD_RETURN_IF_ERROR(check_dtype(out, kDTypeOf<Q>, kName));
  for (const TensorView& t : call.inputs) SWITCHYARD_RETURN_IF_ERROR(check_contiguous(t, kName));
  SWITCHYARD_RETURN_IF_ERROR(check_contiguous(out, kName));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(q, out, kName));
  SWITCHYARD_RETURN_IF_ERROR(check_same_shape(k, v, kName));
  const int rank = q.rank();
  bool ok = rank >= 3 && k.rank() == rank;
  for (int d = 0; ok && d < rank - 3; ++d) ok = q.dim(d) == k.dim(d);
  const std::int64_t sq = ok ? q.dim(rank - 3) : 0;
  const std::int64_t heads = ok ? q.dim(rank - 2) : 0;
  const std::int64_t dh = ok ? q.dim(rank - 1) : 0;
  const std::int64_t skv = ok ? k.dim(rank - 3) : 0;
  const std::int64_t kv_heads = ok ? k.dim(rank - 2) : 0;
  ok = ok && k.dim(rank - 1) == dh && kv_heads > 0 && heads % kv_heads == 0;
  if (!ok) {
    return invalid_argument_error(fmt::format(
        "{}: q {} and k/v {} are not [..., Sq, H, Dh] and [..., Skv, Hkv, Dh] with H divisible "
        "by Hkv",
        kName, q.shape().to_string(), k.shape().to_string()));
  }
  const Q* pm = nullptr;
  if constexpr (kMask) {
    const TensorView& mask = call.inputs[3];
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(mask, kDTypeOf<Q>, kName));
    if (mask.rank() != 2 || mask.dim(0) != sq || mask.dim(1) != skv) {
      return invalid_argument_error(fmt::format("{}: mask must have shape [{}, {}], got {}", kName,
                                                sq, skv, mask.shape().to_string()));
    }
    pm = mask.first_as<const Q>();
  }
  const std::int64_t group = heads / kv_heads;
  const double scale = call.params.scale;
  const bool causal = call.params.causal;
  const std::int64_t query_offset = call.params.query_offset;
  const Q* pq = q.first_as<const Q>();
  const KV* pk = k.first_as<const KV>();
  const KV* pv = v.first_as<const KV>();
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
                              const KV* kr = pk + ((b * skv + j) * kv_heads + kvh) * dh;
                              double dot = 0.0;
                              for (std::int64_t e = 0; e < dh; ++e) {
                                dot += static_cast<double>(to_f32(qr[e])) * to_f32(kr[e]);
                              }
                              double logit = dot * scale;
                              if constexpr (kMask) logit += to_f32(pm[s * skv + j]);
                              p[j] = logit;
                              m = std::max(m, logit);
                            }
                            std::fill(acc.begin(), acc.end(), 0.0);
                            Q* orow = po + r * dh;
                            if (valid == 0 || m == -std::numeric_limits<double>::infinity()) {
                              // Every key masked: the softmax contract gives zero weights.
                              for (std::int64_t e = 0; e < dh; ++e) orow[e] = from_f32<Q>(0.0f);
                              continue;
                            }
                            double sum = 0.0;
                            for (std::int64_t j = 0; j < valid; ++j) {
                              p[j] = std::exp(p[j] - m);
                              sum += p[j];
                              const KV* vr = pv + ((b * skv + j) * kv_heads + kvh) * dh;
                              for (std::int64_t e = 0; e < dh; ++e) acc[e] += p[j] * to_f32(vr[e]);
                            }
                            for (std::int64_t e = 0; e < dh; ++e)
                              orow[e] = from_f32<Q>(static_cast<float>(acc[e] / sum));
                          }
                        });
  return Status::ok();
}

template <typename Q, bool kMask>
KernelFn attention_for(DType kv) {
  switch (kv) {
    case DType::kF32: return &attention_kernel_impl<Q, float, kMask>;
    case DType::kF16: return &attention_kernel_impl<Q, F16, kMask>;
    case DType::kBF16: return &attention_kernel_impl<Q, BF16, kMask>;
    default: return nullptr;
  }
}

template <bool kMask>
KernelFn attention_for(DType q, DType kv) {
  switch (q) {
    case DType::kF32: return attention_for<float, kMask>(kv);
    case DType::kF16: return attention_for<F16, kMask>(kv);
    case DType::kBF16: return attention_for<BF16, kMask>(kv);
    default: return nullptr;
  }
}

}  // namespace

KernelFn attention_kernel(DType q, DType kv, bool with_mask) {
  return with_mask ? attention_for<true>(q, kv) : attention_for<false>(q, kv);
}

}  // namespace switchyard::cpu
