// LlamaModel: probing, the graph, planning and the KV-cached eval loop. The file
// comment of llama.h explains how the KV cache maps onto the planner.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <new>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "switchyard/backends.h"
#include "switchyard/collective.h"
#include "switchyard/dispatch.h"
#include "switchyard/environment.h"
#include "switchyard/executor.h"
#include "switchyard/llama.h"
#include "switchyard/quant.h"

namespace switchyard {
namespace {

constexpr std::string_view kTokens = "tokens";
constexpr std::string_view kPositions = "positions";
constexpr std::string_view kMask = "kq_mask";
constexpr std::string_view kLogits = "logits";
constexpr std::string_view kLogitRows = "logit_rows";

// Bytes of one token's keys (or values) of one layer in a cache of `dtype`: kv_dim
// values, whole blocks for q8_0 (load checks the head size).
std::int64_t cache_row_bytes(const LlamaConfig& c, DType dtype) {
  return c.kv_dim() / block_elems(dtype) * block_bytes(dtype);
}

// The KV cache is sized by a requested token count and the file's dimensions:
// checked against the machine's memory before anything is allocated, so that a
// request too large is an error that says how large, not std::bad_alloc.
Status check_cache_fits(const LlamaConfig& c, DType dtype, std::int64_t tokens) {
  std::int64_t bytes = 0;
  const bool overflow = __builtin_mul_overflow(tokens, cache_row_bytes(c, dtype), &bytes) ||
                        __builtin_mul_overflow(bytes, c.block_count, &bytes) ||
                        __builtin_mul_overflow(bytes, std::int64_t{2}, &bytes);
  const std::int64_t memory = physical_memory_bytes();
  if (overflow || (memory > 0 && bytes > memory)) {
    return resource_exhausted_error(fmt::format(
        "llama: a KV cache of {} tokens x {} layers x {} values (k and v, {}) needs {}, more "
        "than this machine's {} of memory; ask for fewer tokens",
        tokens, c.block_count, c.kv_dim(), name(dtype),
        overflow ? std::string("more than 2^63 bytes") : fmt::format("{:.1f} GiB", bytes / 0x1p30),
        fmt::format("{:.1f} GiB", memory / 0x1p30)));
  }
  return Status::ok();
}

std::string k_cache_name(std::int64_t i) { return fmt::format("blk.{}.k_cache", i); }
std::string v_cache_name(std::int64_t i) { return fmt::format("blk.{}.v_cache", i); }
// The set_rows nodes that write a step's rows into the cache (graph outputs bound
// to the cache itself, Note [Rows written in place]).
std::string k_set_name(std::int64_t i) { return fmt::format("blk.{}.k_cache_set", i); }
std::string v_set_name(std::int64_t i) { return fmt::format("blk.{}.v_cache_set", i); }
std::string attention_name(std::int64_t i) { return fmt::format("blk.{}.attention", i); }

// A weight converted to f32 at load (its kernel is missing on the selected
// backend): the values every consumer sees, owned by the graph.
Result<std::shared_ptr<const void>> to_f32(const GgufFile& file, const GgufTensorInfo& info) {
  auto values = std::make_shared<std::vector<float>>(static_cast<std::size_t>(info.shape.numel()));
  SWITCHYARD_RETURN_IF_ERROR(row_to_f32(info.dtype, file.tensor_bytes(info), *values));
  return std::shared_ptr<const void>(values, values->data());
}

// Note [Tensor-parallel llama]
// A model split over N ranks (LlamaLoadOptions::devices) runs one plan per rank,
// each with its share of every matrix (docs/multi-gpu.md has the picture):
//   - attention by heads: rank r has query heads [r H/N, (r + 1) H/N) and kv
//     heads [r Hkv/N, ...) (so a kv head's query group stays on one rank), the
//     rows of q, k and v (and their biases) that make them, its part of the KV
//     cache, and the columns of attn_output that read them;
//   - the feed-forward by hidden units: rows of gate and up, the same columns of
//     down, split at whole blocks of down's type where they can be;
//   - attn_output and ffn_down then give partial sums of the residual update,
//     and an all_reduce after each adds them up (two per layer);
//   - the embedding table by columns (rank r looks up its slice of each token's
//     vector, and an all_gather joins the slices) and the output head by
//     vocabulary (rank r computes logits [r V/N, (r + 1) V/N), and an
//     all_gather joins them), so that no rank holds either whole.
// Norms, rope and the residual stream are computed by every rank on the same
// values. A column share that cuts through a quantized block is converted to f32
// at load (the report names it). A plan of one rank (devices = 1) has the same
// collectives, as copies: the plan a single device runs in a group.
struct Sharding {
  int rank = 0;
  // 0: not split, no collectives.
  int ranks = 0;
};

// [begin, end) of rank `rank`'s share of `total` over `ranks`, in whole `unit`s
// when total is a multiple of unit with at least one per rank, else in elements.
std::pair<std::int64_t, std::int64_t> share_of(std::int64_t total, int rank, int ranks,
                                               std::int64_t unit) {
  if (total % unit != 0 || total / unit < ranks) unit = 1;
  const std::int64_t units = total / unit;
  return {units * rank / ranks * unit, units * (rank + 1) / ranks * unit};
}

// What a rank keeps of a [rows, cols] matrix: rows [begin, end), or columns.
struct Share {
  bool columns = false;
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

// Builds the step graph, probing each weight on the way (the probe decides whether
// the weight is used as stored or dequantized at load). `config` is the rank's:
// its heads and kv heads (Note [Tensor-parallel llama]).
class GraphAssembler {
 public:
  GraphAssembler(const GgufFile& file, const LlamaConfig& config, DType cache_dtype,
                 const KernelBindingTable& table, Registry& registry, BackendId backend,
                 LlamaKernelReport& report, Sharding sharding)
      : file_(file),
        c_(config),
        cache_dtype_(cache_dtype),
        table_(table),
        registry_(registry),
        backend_(backend),
        report_(report),
        sharding_(sharding) {}

  Result<Graph> build() {
    const std::int64_t t = b_.symbol(kTokens);
    const std::int64_t kv = b_.symbol("kv");
    const std::int64_t h = c_.head_count;
    const std::int64_t hkv = c_.head_count_kv;
    const std::int64_t dh = c_.head_dim();
    ValueId tokens = b_.input(std::string(kTokens), DType::kI32, {t});
    ValueId pos = b_.input(std::string(kPositions), DType::kI32, {t});
    ValueId mask = b_.input(std::string(kMask), DType::kF32, {t, kv});
    // Note [Logits of chosen rows]
    // A prompt needs the logits of its last token only, and the output head is the
    // largest matrix of the model: over every row it costs a [tokens, vocab]
    // product and as many floats copied to the caller (512 x 128256 x 4 bytes,
    // 263 MB, for a 512-token chunk of Llama-3's vocabulary). So the head reads
    // only the rows that `logit_rows` names (symbol "rows": every token's when
    // the caller asks for all logits, the last one's otherwise), picked out of
    // the final hidden state by get_rows before the output norm.
    const std::int64_t rows = b_.symbol("rows");
    ValueId logit_rows = b_.input(std::string(kLogitRows), DType::kI32, {rows});
    std::vector<ValueId> k_cache(static_cast<std::size_t>(c_.block_count));
    std::vector<ValueId> v_cache(k_cache.size());
    for (std::int64_t i = 0; i < c_.block_count; ++i) {
      k_cache[static_cast<std::size_t>(i)] =
          b_.input(k_cache_name(i), cache_dtype_, {kv, hkv * dh});
      v_cache[static_cast<std::size_t>(i)] =
          b_.input(v_cache_name(i), cache_dtype_, {kv, hkv * dh});
    }

    ValueId x;
    if (split()) {
      const auto [begin, end] = share_of(c_.embedding_length, sharding_.rank, sharding_.ranks, 1);
      SWITCHYARD_ASSIGN_OR_RETURN(ValueId embd, weight("token_embd.weight", "token_embd",
                                                       OpKind::kGetRows, Share{true, begin, end}));
      x = gathered(
          b_.op(OpKind::kGetRows, {embd, tokens}, "token_embd", {}, "token_embd", DType::kF32),
          "token_embd_gather");
    } else {
      SWITCHYARD_ASSIGN_OR_RETURN(ValueId embd, embedding_table());
      x = b_.op(OpKind::kGetRows, {embd, tokens}, "token_embd", {}, "token_embd", DType::kF32);
    }
    std::vector<ValueId> k_all, v_all;
    OpParams rope;
    rope.rope_mode = c_.rope_mode;
    rope.rope_base = c_.rope_freq_base;
    rope.rope_dims = static_cast<int>(c_.rope_dims);
    // Rope scaling, as per-pair frequency divisors: the file's rope_freqs.weight
    // (Llama 3's long context), times the linear factor where there is one.
    std::vector<ValueId> rope_extra;
    if (c_.rope_freq_factors || c_.rope_linear_scale != 1.0f) {
      std::vector<float> factors(static_cast<std::size_t>(c_.rope_dims / 2), 1.0f);
      if (c_.rope_freq_factors) {
        const GgufTensorInfo* info = file_.find_tensor(kRopeFreqsTensor);  // checked by from_gguf
        std::memcpy(factors.data(), file_.view(*info).data(), factors.size() * sizeof(float));
      }
      for (float& f : factors) f *= c_.rope_linear_scale;
      rope_extra.push_back(
          b_.constant_f32("rope_freqs", {static_cast<std::int64_t>(factors.size())}, factors));
    }
    const auto rope_inputs = [&](ValueId heads) {
      std::vector<ValueId> in = {heads, pos};
      in.insert(in.end(), rope_extra.begin(), rope_extra.end());
      return in;
    };
    OpParams attn;
    attn.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
    OpParams norm;
    norm.eps = c_.rms_eps;
    for (std::int64_t i = 0; i < c_.block_count; ++i) {
      const std::string p = fmt::format("blk.{}.", i);
      ValueId hn = b_.op(OpKind::kRmsNorm, {x, norm_weight(block_tensor_name(i, "attn_norm"))},
                         p + "attn_norm", norm, "attn_norm");
      SWITCHYARD_ASSIGN_OR_RETURN(ValueId q, project(hn, i, "attn_q"));
      SWITCHYARD_ASSIGN_OR_RETURN(ValueId k, project(hn, i, "attn_k"));
      SWITCHYARD_ASSIGN_OR_RETURN(ValueId v, project(hn, i, "attn_v"));
      if (c_.attention_bias) {
        q = biased(q, i, "attn_q", h * dh);
        k = biased(k, i, "attn_k", hkv * dh);
        v = biased(v, i, "attn_v", hkv * dh);
      }
      ValueId qr = b_.op(OpKind::kRope, rope_inputs(b_.reshape(q, {t, h, dh})), p + "q_rope", rope,
                         "rope_q");
      ValueId kr = b_.op(OpKind::kRope, rope_inputs(b_.reshape(k, {t, hkv, dh})), p + "k_rope",
                         rope, "rope_k");
      // The step's rows go into the cache at their positions, and the attention
      // reads the cache with them (Note [KV cache as graph state]).
      ValueId ks = b_.op(OpKind::kSetRows,
                         {k_cache[static_cast<std::size_t>(i)], b_.reshape(kr, {t, hkv * dh}), pos},
                         k_set_name(i), {}, "kv_write");
      ValueId vs = b_.op(OpKind::kSetRows, {v_cache[static_cast<std::size_t>(i)], v, pos},
                         v_set_name(i), {}, "kv_write");
      k_all.push_back(ks);
      v_all.push_back(vs);
      ValueId a = b_.op(OpKind::kAttention,
                        {qr, b_.reshape(ks, {kv, hkv, dh}), b_.reshape(vs, {kv, hkv, dh}), mask},
                        attention_name(i), attn, "attention");
      SWITCHYARD_ASSIGN_OR_RETURN(ValueId o, project(b_.reshape(a, {t, h * dh}), i, "attn_output"));
      if (split()) o = summed(o, p + "attn_all_reduce", "attn_all_reduce");
      x = b_.add(x, o, p + "attn_residual", "residual");
      ValueId fn = b_.op(OpKind::kRmsNorm, {x, norm_weight(block_tensor_name(i, "ffn_norm"))},
                         p + "ffn_norm", norm, "ffn_norm");
      SWITCHYARD_ASSIGN_OR_RETURN(ValueId gate, project(fn, i, "ffn_gate"));
      SWITCHYARD_ASSIGN_OR_RETURN(ValueId up, project(fn, i, "ffn_up"));
      ValueId act = b_.mul(b_.silu(gate, p + "ffn_silu", "ffn_act"), up, p + "ffn_mul", "ffn_act");
      SWITCHYARD_ASSIGN_OR_RETURN(ValueId down, project(act, i, "ffn_down"));
      if (split()) down = summed(down, p + "ffn_all_reduce", "ffn_all_reduce");
      x = b_.add(x, down, p + "ffn_residual", "residual");
    }
    ValueId picked =
        b_.op(OpKind::kGetRows, {x, logit_rows}, "logit_rows", {}, "logit_rows", DType::kF32);
    ValueId out = b_.op(OpKind::kRmsNorm, {picked, norm_weight("output_norm.weight")},
                        "output_norm", norm, "output_norm");
    const std::string head_name = c_.tied_embeddings ? "token_embd.weight" : "output.weight";
    ValueId logits;
    if (split()) {
      const auto [begin, end] = share_of(c_.vocab_size, sharding_.rank, sharding_.ranks, 1);
      SWITCHYARD_ASSIGN_OR_RETURN(
          ValueId head, weight(head_name, "output", OpKind::kMatmul, Share{false, begin, end}));
      logits = gathered(b_.op(OpKind::kMatmul, {out, head}, "output", {}, "output"),
                        std::string(kLogits));
    } else {
      SWITCHYARD_ASSIGN_OR_RETURN(ValueId head, weight(head_name, "output", OpKind::kMatmul));
      logits = b_.op(OpKind::kMatmul, {out, head}, std::string(kLogits), {}, "output");
    }
    b_.output(logits);
    for (std::size_t i = 0; i < k_all.size(); ++i) {
      b_.output(k_all[i]);
      b_.output(v_all[i]);
    }
    return std::move(b_).build();
  }

  // Probes every node the weight probes did not cover (attention, rope, norms,
  // residual adds ...), by role. These have no fallback: a miss here fails planning.
  void probe_other_nodes(const Graph& g) {
    for (const Node& n : g.nodes()) {
      // Weights were probed with their roles.
      if (n.op == OpKind::kMatmul ||
          (n.op == OpKind::kGetRows && g.value(n.inputs[0]).kind == ValueKind::kConstant)) {
        continue;
      }
      std::vector<DType> dtypes;
      for (ValueId in : n.inputs) dtypes.push_back(g.value(in).dtype);
      dtypes.push_back(g.value(n.output).dtype);
      Result<const BindingEntry*> hit = probe_kernel(registry_, table_,
                                                     {.key = n.op,
                                                      .dtypes = DTypeList(dtypes),
                                                      .backend = backend_,
                                                      .role = n.role,
                                                      .fallback = "none: the load fails"});
      ++report_.probes;
      if (!hit.is_ok()) {
        report_.violations.push_back({n.name, n.role, std::string(name(n.op)),
                                      representative_dtype(DTypeList(dtypes)),
                                      "none: the load fails"});
      }
    }
  }

 private:
  static constexpr std::string_view kDequantFallback =
      "weight converted to f32 at load, f32 kernel";

  // x [tokens, n] plus the block's bias for `role` (f32, checked by from_gguf): the
  // rank's n values of it.
  ValueId biased(ValueId x, std::int64_t block, std::string_view role, std::int64_t n) {
    const std::string name = block_bias_name(block, role);
    const GgufTensorInfo* info = file_.find_tensor(name);
    const std::int64_t begin = split() ? row_share(block, role).begin : 0;
    ValueId bias = b_.constant_borrowed(
        name, DType::kF32, Shape{n}, static_cast<const float*>(file_.view(*info).data()) + begin);
    return b_.add(x, b_.broadcast(bias, {b_.symbol(kTokens), n}),
                  fmt::format("blk.{}.{}_bias", block, role), std::string(role) + "_bias");
  }

  ValueId norm_weight(const std::string& name) {
    const GgufTensorInfo* info = file_.find_tensor(name);  // checked by from_gguf
    return b_.constant_borrowed(name, DType::kF32, info->shape, file_.view(*info).data());
  }

  // The weight `name` as the consumer `op` (matmul or get_rows) will read it: as
  // stored when the selected backend serves that key, else converted to f32; all
  // of it, or the rank's share.
  Result<ValueId> weight(const std::string& name, std::string_view role, OpKind op,
                         std::optional<Share> share = std::nullopt) {
    const GgufTensorInfo* info = file_.find_tensor(name);
    const DTypeList dtypes = op == OpKind::kMatmul
                                 ? DTypeList{DType::kF32, info->dtype, DType::kF32}
                                 : DTypeList{info->dtype, DType::kI32, DType::kF32};
    Result<const BindingEntry*> hit = probe_kernel(registry_, table_,
                                                   {.key = op,
                                                    .dtypes = dtypes,
                                                    .backend = backend_,
                                                    .role = role,
                                                    .fallback = kDequantFallback,
                                                    .dtype = info->dtype});
    ++report_.probes;
    const bool as_stored = hit.is_ok() || info->dtype == DType::kF32;
    if (!as_stored) {
      report_.violations.push_back({name, std::string(role), std::string(switchyard::name(op)),
                                    info->dtype, std::string(kDequantFallback)});
    }
    if (share) return shared_weight(*info, role, op, *share, as_stored);
    if (as_stored) {
      return b_.constant_borrowed(name, info->dtype, info->shape, file_.view(*info).data());
    }
    SWITCHYARD_ASSIGN_OR_RETURN(std::shared_ptr<const void> f32, to_f32(file_, *info));
    return b_.constant(name, DType::kF32, info->shape, std::move(f32));
  }

  // The rank's share of a [rows, cols] weight: its rows, borrowed from the file;
  // its columns, copied out of every row in whole blocks, or converted to f32
  // where the share cuts through a block (or the stored type has no kernel).
  Result<ValueId> shared_weight(const GgufTensorInfo& info, std::string_view role, OpKind op,
                                const Share& share, bool as_stored) {
    const std::int64_t rows = info.shape[0];
    const std::int64_t cols = info.shape[1];
    const std::int64_t unit = block_elems(info.dtype);
    const std::int64_t row_bytes = cols / unit * block_bytes(info.dtype);
    const std::span<const std::byte> bytes = file_.tensor_bytes(info);
    const std::int64_t width = share.end - share.begin;
    if (!share.columns) {
      const Shape shape{width, cols};
      const std::span<const std::byte> mine =
          bytes.subspan(static_cast<std::size_t>(share.begin * row_bytes),
                        static_cast<std::size_t>(width * row_bytes));
      if (as_stored) return b_.constant_borrowed(info.name, info.dtype, shape, mine.data());
      auto values = std::make_shared<std::vector<float>>(static_cast<std::size_t>(width * cols));
      SWITCHYARD_RETURN_IF_ERROR(row_to_f32(info.dtype, mine, *values));
      return b_.constant(info.name, DType::kF32, shape,
                         std::shared_ptr<const void>(values, values->data()));
    }
    const Shape shape{rows, width};
    if (as_stored && share.begin % unit == 0 && width % unit == 0) {
      const std::int64_t from = share.begin / unit * block_bytes(info.dtype);
      const std::int64_t take = width / unit * block_bytes(info.dtype);
      auto copy = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(rows * take));
      for (std::int64_t r = 0; r < rows; ++r) {
        std::memcpy(copy->data() + r * take, bytes.data() + r * row_bytes + from,
                    static_cast<std::size_t>(take));
      }
      return b_.constant(info.name, info.dtype, shape,
                         std::shared_ptr<const void>(copy, copy->data()));
    }
    if (as_stored) {
      report_.violations.push_back(
          {info.name, std::string(role), std::string(switchyard::name(op)), info.dtype,
           "converted to f32 at load, f32 kernel",
           fmt::format("rank {}'s columns [{}, {}) cut {} blocks of {}", sharding_.rank,
                       share.begin, share.end, name(info.dtype), unit)});
    }
    auto values = std::make_shared<std::vector<float>>(static_cast<std::size_t>(rows * width));
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t r = 0; r < rows; ++r) {
      SWITCHYARD_RETURN_IF_ERROR(row_to_f32(info.dtype,
                                            bytes.subspan(static_cast<std::size_t>(r * row_bytes),
                                                          static_cast<std::size_t>(row_bytes)),
                                            row));
      std::copy(row.begin() + share.begin, row.begin() + share.end, values->begin() + r * width);
    }
    return b_.constant(info.name, DType::kF32, shape,
                       std::shared_ptr<const void>(values, values->data()));
  }

  [[nodiscard]] bool split() const { return sharding_.ranks > 0; }

  // Note [Tensor-parallel llama]: the rows of q, k, v, gate and up that the rank
  // keeps (attn_output and ffn_down keep the same range of columns).
  Share row_share(std::int64_t block, std::string_view role) const {
    const int r = sharding_.rank;
    if (role == "attn_q" || role == "attn_output") {
      return {role == "attn_output", r * c_.q_dim(), (r + 1) * c_.q_dim()};
    }
    if (role == "attn_k" || role == "attn_v")
      return {false, r * c_.kv_dim(), (r + 1) * c_.kv_dim()};
    // The feed-forward's hidden units, in whole blocks of ffn_down's type.
    const GgufTensorInfo* down = file_.find_tensor(block_tensor_name(block, "ffn_down"));
    const auto [begin, end] =
        share_of(c_.feed_forward_length, r, sharding_.ranks, block_elems(down->dtype));
    return {role == "ffn_down", begin, end};
  }

  // The sum of every rank's x (all_reduce).
  ValueId summed(ValueId x, std::string name, std::string role) {
    OpParams params;
    params.ranks = sharding_.ranks;
    return b_.op(OpKind::kAllReduce, {x}, std::move(name), params, std::move(role));
  }

  // Every rank's x joined along the last dimension (all_gather).
  ValueId gathered(ValueId x, std::string name) {
    OpParams params;
    params.ranks = sharding_.ranks;
    std::string role = name == kLogits ? "output_gather" : name;
    return b_.op(OpKind::kAllGather, {x}, std::move(name), params, std::move(role));
  }

  Result<ValueId> embedding_table() {
    if (embd_.valid()) return embd_;
    SWITCHYARD_ASSIGN_OR_RETURN(embd_, weight("token_embd.weight", "token_embd", OpKind::kGetRows));
    return embd_;
  }

  Result<ValueId> project(ValueId x, std::int64_t block, std::string_view role) {
    std::optional<Share> share;
    if (split()) share = row_share(block, role);
    SWITCHYARD_ASSIGN_OR_RETURN(
        ValueId w, weight(block_tensor_name(block, role), role, OpKind::kMatmul, share));
    return b_.matmul(x, w, fmt::format("blk.{}.{}", block, role), std::string(role));
  }

  const GgufFile& file_;
  const LlamaConfig& c_;
  DType cache_dtype_;
  const KernelBindingTable& table_;
  Registry& registry_;
  BackendId backend_;
  LlamaKernelReport& report_;
  Sharding sharding_;
  GraphBuilder b_;
  ValueId embd_;
};

}  // namespace

std::string LlamaKernelReport::render() const {
  std::string out = fmt::format("kernels: {} probes on {}, {} violation{}\n", probes, name(backend),
                                violations.size(), violations.size() == 1 ? "" : "s");
  for (const BucketNodes& b : buckets) {
    out += fmt::format("  {:<8}", b.bucket);
    for (const auto& [where, n] : b.nodes) out += fmt::format(" {} {} nodes", name(where), n);
    out += "\n";
  }
  if (packed_weights > 0) {
    out += fmt::format("  packed   {} weights for prefill at load, {:.1f} MiB beside the file's\n",
                       packed_weights, static_cast<double>(packed_bytes) / (1024.0 * 1024.0));
  }
  for (const Violation& v : violations) {
    out += fmt::format(
        "  VIOLATION {} ({}, {}): {} -> {}\n", v.tensor, v.role, name(v.dtype),
        v.problem.empty() ? fmt::format("no {} kernel on {}", v.op, name(backend)) : v.problem,
        v.fallback);
  }
  for (const CoverageBinding& m : seal.masked) {
    out += fmt::format("  masked: {} {}\n", name(m.backend), m.kernel_name);
  }
  return out;
}

struct LlamaModel::State {
  explicit State(GgufFile f) : file(std::move(f)) {}
  // Weights are borrowed from its mapping.
  GgufFile file;
  // The model's, and this rank's: its heads and kv heads (Note [Tensor-parallel
  // llama]; the same as config when the model is not split).
  LlamaConfig config;
  LlamaConfig rank_config;
  // A split model (LlamaLoadOptions::devices): rank 0's state holds the group
  // and the other ranks, each with its own plan, executor, cache and registry,
  // and the logits buffer its eval writes (Note [Running the ranks]).
  std::unique_ptr<HostRankGroup> group;
  std::vector<std::unique_ptr<State>> peers;
  std::unique_ptr<Registry> peer_registry;
  std::vector<float> rank_logits;
  // A device backend's communicators (BackendMemory::create_communicators), and
  // the ranks the model is split over (0: not split).
  std::vector<std::unique_ptr<Communicator>> device_comms;
  int devices = 0;
  // On a device backend: its memory, and the device this rank's plan, cache and
  // streams live on (rank r's is device r; null on the cpu, whose ranks share the
  // host). The thread running the rank makes it current first.
  BackendMemory* device_memory = nullptr;
  int rank_device = 0;
  // Why a device group's eval failed (Note [Running the ranks]); every later
  // eval returns it.
  Status device_group_failure;
  [[nodiscard]] Status use_device(int d) const {
    return device_memory != nullptr ? device_memory->use_device(d) : Status::ok();
  }
  LlamaKernelReport report;
  std::shared_ptr<const ExecutionPlan> plan;
  std::optional<Executor> executor;
  ExecProfile exec_profile;
  LlamaProfile profile;
  std::int64_t max_context = 0;
  std::int64_t max_batch = 0;
  std::int64_t position = 0;
  // Per layer: [max_context, kv_heads, head_dim] f32, in one allocation: on the
  // host, or on the selected backend when its memory is not the host's (Note [KV
  // cache on the device]).
  std::vector<std::byte*> k_cache, v_cache;
  std::vector<std::byte> host_cache;
  DType cache_dtype = DType::kF16;
  BackendMemory* cache_memory = nullptr;
  void* device_cache = nullptr;
  BackendId cache_backend = kHostBackend;
  // On a device (Note [Step inputs on the device]): the stream the executor and
  // the model's own copies share, the step's inputs packed at fixed offsets on
  // the host and on the device, and the device's logits.
  void* stream = nullptr;
  std::vector<std::int32_t> step_host;
  void* step_device = nullptr;
  void* logits_device = nullptr;
  std::int64_t logits_device_rows = 0;
  // Rows a decode step's cache binding is rounded up to (1: exact).
  std::int64_t kv_round = 1;
  // The tensors one eval binds, by slot (see slot_of), and which slot each of the
  // plan's inputs and outputs takes, resolved once at load.
  std::vector<TensorView> slots;
  std::vector<std::size_t> input_slots, output_slots;
  std::vector<TensorView> inputs, outputs;
  std::vector<std::int32_t> positions;
  std::vector<float> mask;
  std::vector<std::int32_t> logit_rows;

  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    // A rank's streams, recordings and memory are its device's: they are released
    // with that device current (Note [One device per rank] in backend_memory.h).
    if (device_memory != nullptr) (void)device_memory->use_device(rank_device);
    executor.reset();  // its streams may still use the cache
    if (cache_memory != nullptr) {
      if (stream != nullptr) cache_memory->destroy_stream(stream);
      for (void* p : {device_cache, step_device, logits_device}) cache_memory->deallocate(p);
    }
  }

  // Offsets, in i32 elements, of the step inputs packed in step_host and
  // step_device: tokens, positions and logit rows (max_batch each), then the mask.
  [[nodiscard]] std::int64_t positions_at() const { return max_batch; }
  [[nodiscard]] std::int64_t logit_rows_at() const { return 2 * max_batch; }
  [[nodiscard]] std::int64_t mask_at() const { return 3 * max_batch; }

  // Note [KV cache on the device]
  // The cache is state that every step reads in full and appends to. Were it a
  // host tensor, a device plan would copy all of it in and the new rows out on
  // every step: for an 8B model at 4k tokens, a gigabyte over the bus per token.
  // On a backend whose memory the host cannot address, the model allocates it
  // there instead and tells the planner so (PlanOptions::external_backends): the
  // attention reads it in place, and the rope and v projection that write the new
  // rows write them straight into it.
  // `device`: the memory of `backend` when the cache goes there, else null.
  Status allocate_cache(BackendMemory* device, BackendId backend) {
    // Bytes of one layer's k (or v) rows.
    const auto per_layer =
        static_cast<std::size_t>(max_context * cache_row_bytes(rank_config, cache_dtype));
    const std::size_t total = 2 * per_layer * static_cast<std::size_t>(config.block_count);
    std::byte* base = nullptr;
    if (device != nullptr) {
      Result<void*> p = device->allocate(static_cast<std::int64_t>(total));
      if (!p.is_ok()) {
        return p.status().with_context(
            fmt::format("llama: allocating the {}-token {} KV cache ({} MiB) on {}", max_context,
                        name(cache_dtype), total >> 20, name(backend)));
      }
      cache_memory = device;
      device_cache = *p;
      cache_backend = backend;
      base = static_cast<std::byte*>(device_cache);
      // Note [Step inputs on the device]
      // A device step reads its tokens, positions, mask and logit rows where its
      // kernels run, and writes its logits there: the plan then has no copy step,
      // so every step is a kernel of the device and the executor can record a
      // decode step and replay it (Note [Recorded runs] in executor.h). The model
      // packs the inputs at fixed offsets, so that one upload moves them and a
      // binding stays the same from step to step, and downloads the logits after.
      step_host.assign(static_cast<std::size_t>(mask_at() + max_batch * max_context), 0);
      Result<void*> step = device->allocate(static_cast<std::int64_t>(step_host.size() * 4));
      if (!step.is_ok()) return step.status().with_context("llama: the step's inputs");
      step_device = *step;
    } else {
      host_cache.assign(total, std::byte{0});
      base = host_cache.data();
    }
    for (std::int64_t i = 0; i < config.block_count; ++i) {
      k_cache.push_back(base + static_cast<std::size_t>(2 * i) * per_layer);
      v_cache.push_back(base + static_cast<std::size_t>(2 * i + 1) * per_layer);
    }
    return Status::ok();
  }
};

Result<LlamaModel> LlamaModel::load(GgufFile file, const LlamaLoadOptions& options) {
  if (!is_compiled(options.backend)) {
    return unavailable_error(
        fmt::format("llama: backend '{}' is not compiled into this build", name(options.backend)));
  }
  // The model loader is the top of the stack: it publishes the built-in table
  // unless its caller already published one.
  SWITCHYARD_RETURN_IF_ERROR(install_builtin_table().status());
  auto state = std::make_unique<State>(std::move(file));
  State& s = *state;
  SWITCHYARD_ASSIGN_OR_RETURN(s.config, LlamaConfig::from_gguf(s.file));
  const LlamaConfig& c = s.config;
  if (options.max_context > c.context_length) {
    return out_of_range_error(
        fmt::format("llama: a context of {} tokens is past the model's context length, {} "
                    "(llama.context_length); ask for at most {}",
                    options.max_context, c.context_length, c.context_length));
  }
  if (options.cache_dtype != DType::kF32 && options.cache_dtype != DType::kF16 &&
      options.cache_dtype != DType::kQ8_0) {
    return invalid_argument_error(
        fmt::format("llama: the KV cache is f16, f32 or q8_0, not {}", name(options.cache_dtype)));
  }
  if (options.cache_dtype == DType::kQ8_0 && c.head_dim() % block_elems(DType::kQ8_0) != 0) {
    return invalid_argument_error(fmt::format(
        "llama: a q8_0 KV cache keeps each head in blocks of {} values; this model's heads have "
        "{}: use an f16 or f32 cache",
        block_elems(DType::kQ8_0), c.head_dim()));
  }
  const int ranks = options.devices;
  if (ranks < 0 || ranks > HostRankGroup::kMaxRanks) {
    return invalid_argument_error(fmt::format("llama: devices is 0 (not split) to {}, not {}",
                                              HostRankGroup::kMaxRanks, ranks));
  }
  if (ranks > 0) {
    // Note [Tensor-parallel llama]: whole query groups per rank, equal slices of
    // the embedding and the vocabulary.
    for (const auto& [what, count] :
         {std::pair{"kv heads", c.head_count_kv}, std::pair{"embedding values", c.embedding_length},
          std::pair{"vocabulary entries", c.vocab_size}}) {
      if (count % ranks != 0) {
        return invalid_argument_error(fmt::format(
            "llama: the model's {} {} do not split evenly over {} devices", count, what, ranks));
      }
    }
    if (c.feed_forward_length < ranks) {
      return invalid_argument_error(
          fmt::format("llama: {} feed-forward units do not give each of {} devices one",
                      c.feed_forward_length, ranks));
    }
  }
  s.rank_config = c;
  if (ranks > 0) {
    s.rank_config.head_dimension = c.head_dim();
    s.rank_config.head_count = c.head_count / ranks;
    s.rank_config.head_count_kv = c.head_count_kv / ranks;
  }
  s.cache_dtype = options.cache_dtype;
  s.max_context = options.max_context > 0 ? options.max_context
                                          : std::min<std::int64_t>(c.context_length, 2048);
  s.max_batch = options.max_batch > 0 ? std::min(options.max_batch, s.max_context)
                                      : std::min<std::int64_t>(s.max_context, 512);
  Registry& registry = options.registry ? *options.registry : global_registry();
  if (options.strict) registry.set_strict_policy(*options.strict);
  // The selected backend's slow paths are this load's violations, the CPU's too.
  registry.set_selected_backends(std::vector<BackendId>{options.backend});
  s.devices = ranks;
  if (ranks == 0) {
    SWITCHYARD_RETURN_IF_ERROR(load_rank(s, options, 0, 0, registry, nullptr));
    return LlamaModel(std::move(state));
  }
  // Rank r's communicator: a simulated rank of a HostRankGroup on the cpu, else
  // one of a group of the backend's own (NCCL on cuda), rank r on device r (Note
  // [One device per rank] in backend_memory.h).
  std::function<Communicator*(int)> comm_of;
  if (options.backend == BackendId::kCpu) {
    SWITCHYARD_ASSIGN_OR_RETURN(s.group, HostRankGroup::create(ranks));
    comm_of = [&s](int r) -> Communicator* { return &s.group->rank(r); };
  } else {
    s.device_memory = current_table()->backend_memory(options.backend);
    if (s.device_memory == nullptr) {
      return unavailable_error(fmt::format("llama: {} has no memory", name(options.backend)));
    }
    const int devices = s.device_memory->device_count();
    if (devices < ranks) {
      return unavailable_error(fmt::format(
          "llama: a model split over {} devices needs {} {} devices; this machine has {}", ranks,
          ranks, name(options.backend), devices));
    }
    SWITCHYARD_ASSIGN_OR_RETURN(s.device_comms, s.device_memory->create_communicators(ranks));
    comm_of = [&s](int r) { return s.device_comms[static_cast<std::size_t>(r)].get(); };
  }
  // Note [Running the ranks]
  SWITCHYARD_RETURN_IF_ERROR(s.use_device(0));
  SWITCHYARD_RETURN_IF_ERROR(load_rank(s, options, 0, ranks, registry, comm_of(0)));
  // The other ranks probe the same keys: rank 0's registry has them, and a
  // private one keeps their records from repeating its report.
  s.peer_registry = std::make_unique<Registry>(
      RegistryConfig{.selected_backends = std::vector<BackendId>{options.backend},
                     .sink = [](std::string_view) {}});
  for (int r = 1; r < ranks; ++r) {
    auto peer = std::make_unique<State>(s.file);
    peer->config = s.config;
    peer->rank_config = s.rank_config;
    peer->cache_dtype = s.cache_dtype;
    peer->max_context = s.max_context;
    peer->max_batch = s.max_batch;
    peer->device_memory = s.device_memory;
    peer->rank_device = r;
    Status loaded = peer->use_device(r);
    if (loaded.is_ok()) loaded = load_rank(*peer, options, r, ranks, *s.peer_registry, comm_of(r));
    // The loading thread's device is rank 0's again, whether or not rank r loaded.
    SWITCHYARD_RETURN_IF_ERROR(s.use_device(0));
    SWITCHYARD_RETURN_IF_ERROR(loaded.with_context(fmt::format("llama: rank {} of {}", r, ranks)));
    s.peers.push_back(std::move(peer));
  }
  return LlamaModel(std::move(state));
}

// One rank's graph, probes, plan, executor and cache (all of the model when it is
// not split).
Status LlamaModel::load_rank(State& s, const LlamaLoadOptions& options, int rank, int ranks,
                             Registry& registry, Communicator* comm) {
  const LlamaConfig& c = s.rank_config;
  TableSnapshot table = current_table();
  BackendMemory* backend_memory = table->backend_memory(options.backend);
  BackendMemory* cache_device =
      backend_memory != nullptr && !backend_memory->host_addressable() ? backend_memory : nullptr;
  const bool cache_on_device = cache_device != nullptr;
  // A device cache is checked by its allocation, which names the backend.
  if (!cache_on_device) {
    SWITCHYARD_RETURN_IF_ERROR(check_cache_fits(c, s.cache_dtype, s.max_context));
  }

  s.report.backend = options.backend;

  GraphAssembler assembler(s.file, c, s.cache_dtype, *table, registry, options.backend, s.report,
                           Sharding{rank, ranks});
  SWITCHYARD_ASSIGN_OR_RETURN(Graph graph, assembler.build());
  assembler.probe_other_nodes(graph);
  const std::vector<CoverageBinding> masked = masked_bindings();
  Result<SealReport> sealed = registry.seal_or_error(masked);
  if (!sealed.is_ok()) return sealed.status();
  s.report.seal = std::move(*sealed);
  // A collective cannot run anywhere else: its communicator is the selected
  // backend's, so a missing one fails the load, naming the node and its role.
  for (const LlamaKernelReport::Violation& v : s.report.violations) {
    const Result<OpKind> op = parse_op(v.op);
    if (op.is_ok() && op_family(*op) == OpFamily::kCollective) {
      return failed_precondition_error(fmt::format(
          "llama: {} ({}, {}) has no {} kernel on {}, and a collective runs only on the backend "
          "of its communicator",
          v.tensor, v.role, name(v.dtype), v.op, name(options.backend)));
    }
  }

  PlanOptions plan_options;
  plan_options.policy.preferred = {options.backend};
  plan_options.calibration = options.calibration;
  plan_options.admit_precision_trades = options.admit_precision_trades;
  plan_options.pack_weights = options.pack_weights;
  // Planning records its resolutions and seals again: in this load's registry, the
  // one the probes went to, never the process-wide one behind the caller's back.
  plan_options.registry = &registry;
  if (cache_on_device) {
    for (std::int64_t i = 0; i < c.block_count; ++i) {
      for (const std::string& name :
           {k_cache_name(i), v_cache_name(i), k_set_name(i), v_set_name(i)}) {
        plan_options.external_backends[name] = options.backend;
      }
    }
    // Note [Step inputs on the device].
    for (std::string_view name : {kTokens, kPositions, kMask, kLogitRows, kLogits}) {
      plan_options.external_backends[std::string(name)] = options.backend;
    }
  }
  plan_options.buckets = {
      {"decode", {{std::string(kTokens), 1, 1}, {"kv", 1, s.max_context}, {"rows", 1, 1}}},
      {"prefill",
       {{std::string(kTokens), 2, std::max<std::int64_t>(2, s.max_batch)},
        {"kv", 2, s.max_context},
        {"rows", 1, std::max<std::int64_t>(2, s.max_batch)}}},
  };
  SWITCHYARD_ASSIGN_OR_RETURN(ExecutionPlan planned, plan_graph(graph, table, plan_options));
  for (const BucketReport& b : planned.report().buckets) {
    LlamaKernelReport::BucketNodes nodes{b.name, {}};
    for (const BackendTotal& t : b.per_backend) nodes.nodes.emplace_back(t.backend, t.nodes);
    s.report.buckets.push_back(std::move(nodes));
  }
  s.plan = std::make_shared<const ExecutionPlan>(std::move(planned));
  ExecutorOptions exec_options;
  exec_options.runner = options.runner;
  if (options.profile) exec_options.profile = &s.exec_profile;
  s.exec_profile.wait_for_devices = options.profile_device_time;
  exec_options.on_upload = options.on_upload;
  exec_options.record_runs = options.record_steps;
  exec_options.comm = comm;
  if (cache_on_device) {
    // One stream for the executor and the model's own copies, so that a step's
    // upload, kernels and download are ordered without waits between them.
    Result<void*> stream = cache_device->create_stream();
    if (!stream.is_ok()) return stream.status().with_context("llama: a stream for the model");
    s.cache_memory = cache_device;
    s.stream = *stream;
    exec_options.streams[static_cast<std::size_t>(options.backend)] = s.stream;
    // Note [KV cache as graph state]: a decode step binds the cache rounded up,
    // so that consecutive steps bind the same tensors; recorded or not, so that
    // a step computes the same bits either way.
    s.kv_round = 256;
  }
  // Every planned shape is bucketed; a run outside them would be a planning bug.
  exec_options.allow_unplanned_shapes = false;
  SWITCHYARD_ASSIGN_OR_RETURN(Executor exec, Executor::create(s.plan, exec_options));
  s.executor.emplace(std::move(exec));
  s.report.packed_weights = s.executor->stats().packed_weights;
  s.report.packed_bytes = s.executor->stats().packed_bytes;

  const Graph& g = s.plan->graph();
  std::map<std::string, std::size_t, std::less<>> slot_of = {{std::string(kTokens), 0},
                                                             {std::string(kPositions), 1},
                                                             {std::string(kMask), 2},
                                                             {std::string(kLogits), 3}};
  for (std::int64_t i = 0; i < c.block_count; ++i) {
    const auto base = static_cast<std::size_t>(4 + 4 * i);
    slot_of[k_cache_name(i)] = base;
    slot_of[v_cache_name(i)] = base + 1;
    slot_of[k_set_name(i)] = base + 2;
    slot_of[v_set_name(i)] = base + 3;
  }
  slot_of[std::string(kLogitRows)] = static_cast<std::size_t>(4 + 4 * c.block_count);
  auto slot = [&](const std::string& name) -> Result<std::size_t> {
    auto it = slot_of.find(name);
    if (it == slot_of.end()) {
      return internal_error(
          fmt::format("llama: the plan has an unexpected input/output '{}'", name));
    }
    return it->second;
  };
  for (ValueId id : s.plan->inputs()) {
    SWITCHYARD_ASSIGN_OR_RETURN(std::size_t k, slot(g.value(id).name));
    s.input_slots.push_back(k);
  }
  for (ValueId id : s.plan->outputs()) {
    const Value& v = g.value(id);
    SWITCHYARD_ASSIGN_OR_RETURN(std::size_t k,
                                slot(v.producer >= 0 ? g.node(v.producer).name : v.name));
    s.output_slots.push_back(k);
  }
  s.slots.resize(slot_of.size());
  s.inputs.resize(s.input_slots.size());
  s.outputs.resize(s.output_slots.size());
  return s.allocate_cache(cache_device, options.backend);
}

LlamaModel::LlamaModel(std::unique_ptr<State> state) : state_(std::move(state)) {}
LlamaModel::LlamaModel(LlamaModel&&) noexcept = default;
LlamaModel& LlamaModel::operator=(LlamaModel&&) noexcept = default;
LlamaModel::~LlamaModel() = default;

const LlamaConfig& LlamaModel::config() const { return state_->config; }
const LlamaKernelReport& LlamaModel::kernel_report() const { return state_->report; }
const ExecutionPlan& LlamaModel::plan() const { return *state_->plan; }
std::int64_t LlamaModel::max_context() const { return state_->max_context; }
std::int64_t LlamaModel::max_batch() const { return state_->max_batch; }
std::int64_t LlamaModel::position() const { return state_->position; }
void LlamaModel::reset() {
  state_->position = 0;
  for (const auto& peer : state_->peers) peer->position = 0;
}
int LlamaModel::devices() const { return state_->devices; }

// Note [Warming up]
// The first run of a bucket on a GPU costs far more than the next: the CUDA
// runtime loads kernel code on first use, cuBLASLt chooses an algorithm per
// shape, and the composites grow their scratch memory (cudaMalloc, which waits
// for the device). A 512-token prompt of the Llama-3.1-8B shape took 0.41 s
// cold. A server pays this once at load, not on its first request, and a
// benchmark that times the first request measures the loading. warm_up runs each
// bucket once with token 0 at position 0 (a full prompt chunk asking for its
// last token's logits, then one token), then empties the cache: the rows it
// wrote are overwritten before any later step reads them, because a step reads
// only rows below its own position.
Status LlamaModel::warm_up() {
  State& s = *state_;
  if (s.position != 0) {
    return failed_precondition_error(fmt::format(
        "llama: warm_up needs an empty cache; {} tokens are in it (reset() first)", s.position));
  }
  const std::vector<std::int32_t> tokens(static_cast<std::size_t>(s.max_batch), 0);
  // The last token's logits, as a prompt asks for them (Note [Logits of chosen rows]).
  std::vector<float> logits(static_cast<std::size_t>(s.config.vocab_size));
  for (const std::int64_t n : {s.max_batch, std::int64_t{1}}) {
    const Status st = eval(std::span(tokens).first(static_cast<std::size_t>(n)), logits);
    reset();
    SWITCHYARD_RETURN_IF_ERROR(st.with_context("llama: warming up"));
  }
  reset_profile();
  return Status::ok();
}
const LlamaProfile& LlamaModel::profile() const { return state_->profile; }
const ExecStats& LlamaModel::executor_stats() const { return state_->executor->stats(); }
void LlamaModel::reset_profile() {
  state_->profile = {};
  const bool wait = state_->exec_profile.wait_for_devices;
  state_->exec_profile = {};
  state_->exec_profile.wait_for_devices = wait;
}

// Note [Running the ranks]
// A split model's eval runs every rank's step at once, rank 0 on the calling
// thread and each other rank on a thread of its own, since each waits for the
// others in its collectives; on a device backend each thread first makes its
// rank's device current (Note [One device per rank] in backend_memory.h), the
// calling thread too. Every rank checks the same arguments and ends with the
// same logits (the output head's all_gather), so rank 0's are the model's; the
// arguments are checked once before any rank starts, so that no rank fails on
// them alone. A rank that fails aborts the group, which releases the ranks
// waiting for it. The cpu's group is then reset for the next eval, and every
// rank's position is put back, as one model's is on error. A device group (NCCL)
// cannot be reset: a rank that failed there (a device error) leaves the model
// refusing every later eval with that error. NCCL kernels already queued by its
// peers wait for it regardless; ending them needs ncclCommAbort, which no rank
// calls yet (a thread may not free a communicator that a peer's thread is
// using), so such a failure can leave the eval waiting. All ranks share the
// caller's ParallelRunner (its parallel loops take one caller at a time: a rank
// waits in a collective only outside them).
Status LlamaModel::eval(std::span<const std::int32_t> tokens, std::span<float> logits) {
  State& s = *state_;
  if (s.peers.empty()) {
    SWITCHYARD_RETURN_IF_ERROR(s.use_device(0));
    return eval_rank(s, tokens, logits);
  }
  if (!s.device_group_failure.is_ok()) return s.device_group_failure;
  SWITCHYARD_RETURN_IF_ERROR(check_eval(s, tokens, logits));
  const auto abort_group = [&s](const Status& why) {
    if (s.group != nullptr) {
      s.group->abort(why);
    } else {
      for (const auto& comm : s.device_comms) comm->abort(why);
    }
  };
  const std::int64_t past = s.position;
  std::vector<Status> peer_status(s.peers.size());
  Status mine;
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < s.peers.size(); ++i) {
      // A rank without its thread, or whose buffer cannot grow, fails as a Status
      // and aborts the group, never leaving its peers waiting for it.
      try {
        threads.emplace_back([&, i] {
          State& peer = *s.peers[i];
          try {
            peer.rank_logits.resize(logits.size());
            peer_status[i] = peer.use_device(peer.rank_device);
            if (peer_status[i].is_ok()) {
              peer_status[i] = eval_rank(peer, tokens, peer.rank_logits);
            }
          } catch (const std::bad_alloc&) {
            peer_status[i] = resource_exhausted_error("llama: out of memory for a rank's logits");
          }
          if (!peer_status[i].is_ok()) abort_group(peer_status[i]);
        });
      } catch (const std::system_error& e) {
        peer_status[i] = resource_exhausted_error(fmt::format("llama: no thread: {}", e.what()));
        abort_group(peer_status[i]);
        break;
      }
    }
    mine = s.use_device(0);
    if (mine.is_ok()) mine = eval_rank(s, tokens, logits);
    if (!mine.is_ok()) abort_group(mine);
  }
  Status failed = mine;
  for (std::size_t i = 0; i < peer_status.size() && failed.is_ok(); ++i) {
    if (!peer_status[i].is_ok()) {
      failed = peer_status[i].with_context(fmt::format("llama: rank {}", i + 1));
    }
  }
  if (s.group != nullptr && s.group->aborted() && failed.is_ok()) {
    failed = internal_error("llama: the ranks' group was aborted, but no rank failed");
  }
  if (failed.is_ok()) return Status::ok();
  s.position = past;
  for (const auto& peer : s.peers) peer->position = past;
  if (s.group != nullptr) {
    s.group->reset();
  } else {
    s.device_group_failure = failed.with_context(
        "llama: a rank failed and left the device group aborted; load the model again");
  }
  return failed;
}

// The arguments of an eval, as every rank checks them (Note [Logits of chosen
// rows]).
Status LlamaModel::check_eval(const State& s, std::span<const std::int32_t> tokens,
                              std::span<const float> logits) {
  const LlamaConfig& c = s.config;
  const auto n = static_cast<std::int64_t>(tokens.size());
  if (n < 1 || n > s.max_batch) {
    return invalid_argument_error(
        fmt::format("llama: eval takes 1 to {} tokens, got {}", s.max_batch, n));
  }
  // Every token's logits, or the last token's.
  const auto logit_floats = static_cast<std::int64_t>(logits.size());
  if (logit_floats != n * c.vocab_size && logit_floats != c.vocab_size) {
    return invalid_argument_error(
        fmt::format("llama: logits hold {} floats; {} tokens need {} (every token's) or {} (the "
                    "last token's)",
                    logits.size(), n, n * c.vocab_size, c.vocab_size));
  }
  if (s.position + n > s.max_context) {
    return out_of_range_error(
        fmt::format("llama: {} tokens at position {} overflow the {}-token cache", n, s.position,
                    s.max_context));
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t tok = tokens[static_cast<std::size_t>(i)];
    if (tok < 0 || tok >= c.vocab_size) {
      return out_of_range_error(fmt::format(
          "llama: token {} at index {} is outside the vocabulary [0, {})", tok, i, c.vocab_size));
    }
  }
  return Status::ok();
}

Status LlamaModel::eval_rank(State& s, std::span<const std::int32_t> tokens,
                             std::span<float> logits) {
  const LlamaConfig& c = s.config;
  SWITCHYARD_RETURN_IF_ERROR(check_eval(s, tokens, logits));
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t rows = static_cast<std::int64_t>(logits.size()) / c.vocab_size;
  const std::int64_t past = s.position;
  // Note [KV cache as graph state]
  // The step binds the cache's first `kv` rows as the set_rows nodes' input and
  // output; they write rows [past, past + n) and the attention reads all `kv`.
  // A decode step on a device binds the cache rounded up to kv_round rows (the
  // mask hides the rest, Note [Masked keys] in the CUDA attention), so that 256
  // consecutive steps bind the same tensors and replay one recording.
  std::int64_t kv = past + n;
  if (n == 1 && s.kv_round > 1) {
    kv = std::min(s.max_context, (kv + s.kv_round - 1) / s.kv_round * s.kv_round);
  }
  const bool on_device = s.step_device != nullptr;
  // The step's inputs: packed for one upload on a device (Note [Step inputs on
  // the device]), else in their own vectors.
  std::int32_t* positions = nullptr;
  std::int32_t* logit_rows = nullptr;
  s.mask.resize(static_cast<std::size_t>(n * kv));
  if (on_device) {
    positions = s.step_host.data() + s.positions_at();
    logit_rows = s.step_host.data() + s.logit_rows_at();
    std::copy(tokens.begin(), tokens.end(), s.step_host.begin());
  } else {
    s.positions.resize(static_cast<std::size_t>(n));
    s.logit_rows.resize(static_cast<std::size_t>(rows));
    positions = s.positions.data();
    logit_rows = s.logit_rows.data();
  }
  for (std::int64_t i = 0; i < n; ++i) positions[i] = static_cast<std::int32_t>(past + i);
  // Row i (absolute position past + i) sees keys 0 .. past + i.
  for (std::int64_t i = 0; i < n; ++i) {
    float* row = s.mask.data() + i * kv;
    std::fill(row, row + past + i + 1, 0.0f);
    std::fill(row + past + i + 1, row + kv, -std::numeric_limits<float>::infinity());
  }
  if (on_device) {
    std::memcpy(s.step_host.data() + s.mask_at(), s.mask.data(), s.mask.size() * sizeof(float));
  }
  for (std::int64_t r = 0; r < rows; ++r) logit_rows[r] = static_cast<std::int32_t>(n - rows + r);

  const std::int64_t hkv = s.rank_config.head_count_kv;
  const std::int64_t dh = s.rank_config.head_dim();
  const BackendId at = s.cache_backend;
  std::vector<TensorView>& slots = s.slots;
  const TensorView host_logits =
      TensorView::contiguous(logits.data(), DType::kF32, {rows, c.vocab_size});
  if (on_device) {
    if (rows > s.logits_device_rows) {
      s.cache_memory->deallocate(s.logits_device);
      s.logits_device = nullptr;
      s.logits_device_rows = 0;
      Result<void*> p = s.cache_memory->allocate(rows * c.vocab_size * 4);
      if (!p.is_ok()) return p.status().with_context("llama: the logits on the device");
      s.logits_device = *p;
      s.logits_device_rows = rows;
    }
    auto* base = static_cast<std::int32_t*>(s.step_device);
    slots[0] = TensorView::contiguous(base, DType::kI32, {n}, at);
    slots[1] = TensorView::contiguous(base + s.positions_at(), DType::kI32, {n}, at);
    slots[2] = TensorView::contiguous(base + s.mask_at(), DType::kF32, {n, kv}, at);
    slots[3] = TensorView::contiguous(s.logits_device, DType::kF32, {rows, c.vocab_size}, at);
    slots[static_cast<std::size_t>(4 + 4 * c.block_count)] =
        TensorView::contiguous(base + s.logit_rows_at(), DType::kI32, {rows}, at);
    const std::int64_t used = s.mask_at() + n * kv;
    SWITCHYARD_RETURN_IF_ERROR(
        s.cache_memory
            ->copy(TensorView::contiguous(s.step_host.data(), DType::kI32, {used}),
                   TensorView::contiguous(base, DType::kI32, {used}, at), s.stream)
            .with_context("llama: uploading the step's inputs"));
  } else {
    slots[0] = TensorView::contiguous(const_cast<std::int32_t*>(tokens.data()), DType::kI32, {n});
    slots[1] = TensorView::contiguous(positions, DType::kI32, {n});
    slots[2] = TensorView::contiguous(s.mask.data(), DType::kF32, {n, kv});
    slots[3] = host_logits;
    slots[static_cast<std::size_t>(4 + 4 * c.block_count)] =
        TensorView::contiguous(logit_rows, DType::kI32, {rows});
  }
  for (std::int64_t i = 0; i < c.block_count; ++i) {
    std::byte* k = s.k_cache[static_cast<std::size_t>(i)];
    std::byte* v = s.v_cache[static_cast<std::size_t>(i)];
    const auto base = static_cast<std::size_t>(4 + 4 * i);
    slots[base] = TensorView::contiguous(k, s.cache_dtype, {kv, hkv * dh}, at);
    slots[base + 1] = TensorView::contiguous(v, s.cache_dtype, {kv, hkv * dh}, at);
    slots[base + 2] = slots[base];
    slots[base + 3] = slots[base + 1];
  }
  for (std::size_t i = 0; i < s.inputs.size(); ++i) s.inputs[i] = slots[s.input_slots[i]];
  for (std::size_t i = 0; i < s.outputs.size(); ++i) s.outputs[i] = slots[s.output_slots[i]];
  SWITCHYARD_RETURN_IF_ERROR(s.executor->run(s.inputs, s.outputs));
  if (on_device) {
    SWITCHYARD_RETURN_IF_ERROR(s.cache_memory->copy(slots[3], host_logits, s.stream)
                                   .with_context("llama: downloading the logits"));
  }
  // Note [Non-finite logits]
  // A NaN or an infinity in the logits means a wrong answer however it got there (a
  // NaN weight, a block scale that decodes to infinity, an overflow), and a sampler
  // would quietly pick some token anyway. Scanning the logits costs a read of
  // n x vocab floats, small beside the step. Only when they are bad is the step run
  // again with every node's output checked, to name the node that produced the
  // first non-finite value; the re-run writes the same cache rows with the same
  // values, and the position does not advance.
  if (const std::optional<NonFinite> bad = first_non_finite(host_logits)) {
    Status origin = s.executor->run_checking_finite(s.inputs, s.outputs);
    if (!origin.is_ok()) {
      return origin.with_context(fmt::format("llama: non-finite logits at position {}", past));
    }
    return failed_precondition_error(
        fmt::format("llama: logit {} at position {} is {}, and a checked re-run of the step "
                    "found no node that writes a non-finite value",
                    bad->index, past, bad->value));
  }
  s.position = past + n;

  if (!s.exec_profile.node_ns.empty()) {
    const Graph& g = s.plan->graph();
    s.profile.node_ns.resize(s.exec_profile.node_ns.size());
    for (std::size_t i = 0; i < s.exec_profile.node_ns.size(); ++i) {
      const Node& node = g.node(static_cast<std::int32_t>(i));
      const OpFamily fam = node.fused_key != 0 ? OpFamily::kFused : op_family(node.op);
      s.profile.family_ns[static_cast<std::size_t>(fam)] += s.exec_profile.node_ns[i];
      s.profile.node_ns[i] += s.exec_profile.node_ns[i];
      s.exec_profile.node_ns[i] = 0;
    }
    s.profile.copy_ns += s.exec_profile.copy_ns;
    s.exec_profile.copy_ns = 0;
  }
  return Status::ok();
}

std::int32_t argmax_token(std::span<const float> logits) {
  if (logits.empty()) return -1;
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<std::int32_t>(best);
}

}  // namespace switchyard
