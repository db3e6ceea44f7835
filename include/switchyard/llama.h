// Llama-family models: configuration from GGUF metadata, a graph builder over the
// standard tensor names, load-time kernel probing with a sealed registry, and a
// model that runs prefill and decode against a KV cache.
//
// Overview
//   `LlamaConfig::from_gguf` reads the `llama.*` keys and checks them against each
//   other and against the tensors (every required tensor present with the shape
//   and a dtype the config implies). `LlamaModel::load` then:
//     1. probes every weight with its role ("attn_q", "ffn_down", ...) on the
//        selected backend, with the lookup dispatch will make. A quantized weight
//        whose matmul is missing is dequantized to f32 once at load (the slow path
//        the registry names); any other miss makes planning fail;
//     2. builds one graph for every step (many tokens or one), probes its other
//        nodes (attention, rope, norms ...) by role, and seals the registry: the
//        KernelReport lists nodes per backend and every violation by tensor and
//        dtype; with a strict policy a violation refuses the load;
//     3. plans the graph with two shape buckets, "decode" (one token) and
//        "prefill" (2 to max_batch tokens), and sets up an executor.
//
// KV cache and the planner (Note [KV cache as graph state] in llama.cpp)
//   The cache is caller memory: per layer, a k and a v buffer of [max_context,
//   n_kv_heads x head_dim], f16 by default (LlamaLoadOptions::cache_dtype). Each
//   step binds the first `kv` rows of both (symbol "kv": position + tokens, or
//   more on a device, see below) twice: as graph inputs, and as the outputs of
//   the set_rows nodes that write the step's new k and v rows at their
//   positions. set_rows writes in place when its output is its input's memory,
//   so the attention, which reads set_rows' output, sees the cache with the new
//   rows. Causality is a mask input [tokens, kv] (0 or -inf) the model fills per
//   step, so a prefill can continue a cache at any position.
//
// On a device
//   When the selected backend's memory is not the host's, the cache, the step's
//   inputs (tokens, positions, mask, logit rows) and the logits live on it:
//   one upload before a step, one download after. A decode step binds the cache
//   rounded up to a multiple of 256 rows (masked), so consecutive steps bind the
//   same tensors and the executor replays a recording of the step (Note
//   [Recorded runs] in executor.h) instead of launching each node.
//
// Determinism: the same tokens from the same cache state give bit-identical logits
// (kernels are deterministic for a fixed thread count; see precision claims).
//
// Example
//   SWITCHYARD_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open("model.gguf"));
//   SWITCHYARD_ASSIGN_OR_RETURN(LlamaModel model, LlamaModel::load(file, {}));
//   std::vector<float> logits(prompt.size() * model.config().vocab_size);
//   SWITCHYARD_RETURN_IF_ERROR(model.eval(prompt, logits));
//   std::int32_t next = argmax_token(std::span(logits).last(model.config().vocab_size));
//
// Split over devices (LlamaLoadOptions::devices), the model is one plan per rank
// with collectives between them; eval runs them all (Note [Running the ranks]).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "switchyard/backend.h"
#include "switchyard/executor.h"
#include "switchyard/gguf.h"
#include "switchyard/kernel.h"
#include "switchyard/plan.h"
#include "switchyard/registry.h"
#include "switchyard/status.h"
#include "switchyard/synthetic_model.h"

namespace switchyard {

// The hyperparameters of a llama-family model, as the `<architecture>.*` GGUF keys
// state ("llama", or "qwen2": the same blocks with q/k/v biases and rope over
// half-split pairs).
struct LlamaConfig {
  std::string architecture = "llama";
  std::int64_t context_length = 0;
  std::int64_t embedding_length = 0;
  std::int64_t block_count = 0;
  std::int64_t feed_forward_length = 0;
  std::int64_t head_count = 0;
  std::int64_t head_count_kv = 0;
  std::int64_t vocab_size = 0;
  float rope_freq_base = 10000.0f;
  // Leading dimensions of each head that rope rotates (`llama.rope.dimension_count`,
  // default the whole head); the rest pass through.
  std::int64_t rope_dims = 0;
  float rms_eps = 1e-5f;
  // Which dimensions rope pairs: adjacent ones (llama files, whose converters
  // permute q and k) or each half with the other (qwen2).
  RopeMode rope_mode = RopeMode::kNormal;
  // Linear rope scaling (`rope.scaling.type` linear, or the older
  // `rope.scale_linear`): every angle divided by this.
  float rope_linear_scale = 1.0f;
  // The file has `rope_freqs.weight`, per-pair frequency divisors (Llama 3's
  // long-context scaling; from_gguf).
  bool rope_freq_factors = false;
  // The head size: `attention.key_length` where given (value_length must
  // equal it), else embedding_length / head_count. 0 in a hand-built config
  // means the latter.
  std::int64_t head_dimension = 0;
  // q, k and v have bias vectors `blk.N.attn_{q,k,v}.bias` (qwen2; from_gguf).
  bool attention_bias = false;
  // `general.file_type` where the file states it (the "mostly" storage type,
  // as quantizers number it), else -1.
  std::int64_t file_type = -1;
  // True when the file has no `output.weight` and the logits reuse token_embd.
  bool tied_embeddings = false;
  // Tokens that end a sequence: `tokenizer.ggml.eos_token_id` and
  // `tokenizer.ggml.eot_token_id` where the file has them (from_gguf), each
  // checked to be in the vocabulary. Generation stops at one (`run`).
  std::vector<std::int32_t> end_tokens;

  [[nodiscard]] std::int64_t head_dim() const {
    return head_dimension > 0 ? head_dimension : embedding_length / head_count;
  }
  [[nodiscard]] std::int64_t q_dim() const { return head_dim() * head_count; }
  [[nodiscard]] std::int64_t kv_dim() const { return head_dim() * head_count_kv; }

  // Reads and checks the metadata: `general.architecture` must be "llama" or
  // "qwen2", the prefix of every key below; the required keys (context_length,
  // embedding_length, block_count, feed_forward_length, attention.head_count,
  // attention.layer_norm_rms_epsilon) must be present and positive;
  // head_count_kv defaults to head_count, the rope base to 10000, the head size
  // to embedding / heads (attention.key_length overrides it; even, as rope
  // rotates pairs), the rotated dimensions to the head size (even, at most it),
  // the vocabulary size to the length of `tokenizer.ggml.tokens` or else
  // token_embd's rows; rope.scaling.type may be none or linear (with
  // rope.scaling.factor). kv heads must divide heads. kInvalidArgument naming
  // the key or the inconsistency.
  [[nodiscard]] static Result<LlamaConfig> from_metadata(const GgufMetadata& metadata);

  // from_metadata, then every tensor the config implies is checked: present
  // (kNotFound naming it), with its exact shape and a dtype the model can use
  // (kInvalidArgument naming the tensor, its shape and the expected one). The
  // optional tensors set attention_bias (blk.0.attn_q.bias; always for qwen2)
  // and rope_freq_factors (rope_freqs.weight, [rope_dims / 2]).
  [[nodiscard]] static Result<LlamaConfig> from_gguf(const GgufFile& file);
};

// The standard tensor name of a block's weight: block_tensor_name(3, "attn_q") is
// "blk.3.attn_q.weight"; block_bias_name(3, "attn_q") is "blk.3.attn_q.bias".
[[nodiscard]] std::string block_tensor_name(std::int64_t block, std::string_view role);
[[nodiscard]] std::string block_bias_name(std::int64_t block, std::string_view role);
// Llama 3's per-pair rope frequency divisors, [rope_dims / 2] f32.
inline constexpr std::string_view kRopeFreqsTensor = "rope_freqs.weight";

// What the load found about kernels.
struct LlamaKernelReport {
  BackendId backend = BackendId::kCpu;
  // Planned nodes per backend in the prefill and decode buckets.
  struct BucketNodes {
    std::string bucket;
    std::vector<std::pair<BackendId, int>> nodes;
  };
  std::vector<BucketNodes> buckets;
  // A weight or node whose kernel is missing on the selected backend (or that
  // cannot use it, `problem`): the tensor (or node) name, its role, the op and
  // dtype key, and what runs instead.
  struct Violation {
    std::string tensor;
    std::string role;
    std::string op;
    DType dtype = DType::kF32;
    std::string fallback;
    // What is wrong, where it is not the missing kernel: a split model's share of
    // a weight that cuts through its blocks (Note [Tensor-parallel llama]).
    std::string problem;
  };
  std::vector<Violation> violations;
  // Probes that hit, for the summary line.
  int probes = 0;
  // Weights packed at load for the siblings that read them packed (Note
  // [Prepacked weights]), and the memory those copies take beside the file's.
  std::uint64_t packed_weights = 0;
  std::int64_t packed_bytes = 0;
  // The registry's seal report (every row, misses, masked bindings).
  SealReport seal;

  // A few lines: probes, nodes per backend per bucket, every violation by tensor
  // and dtype, masked bindings.
  [[nodiscard]] std::string render() const;
};

struct LlamaLoadOptions {
  BackendId backend = BackendId::kCpu;
  // The strict policy for this load; nullopt keeps the registry's own (the
  // environment's SWITCHYARD_STRICT_KERNELS for the global registry).
  std::optional<StrictPolicy> strict;
  // Where every probe and seal of the load goes: the weight and node probes, their
  // seal, and the planner's records and second seal. Null: the process-wide registry.
  Registry* registry = nullptr;
  // Cache capacity in tokens; 0 means min(context_length, 2048). More than the
  // model's context_length is kOutOfRange.
  std::int64_t max_context = 0;
  // The KV cache's dtype: f16 (half the memory and the bytes an attention reads;
  // keys and values rounded once, as they are written), f32, or q8_0 (34 bytes per
  // 32 values, quantized per block as they are written; needs a head size that is
  // a multiple of 32 and attention and set_rows kernels for q8_0 on the backend).
  DType cache_dtype = DType::kF16;
  // The largest number of tokens one eval call takes (the prefill bucket's max);
  // 0 means min(max_context, 512).
  std::int64_t max_batch = 0;
  // CPU parallelism for the executor; null runs serially.
  ParallelRunner* runner = nullptr;
  // Collect per-node kernel times on every eval (profile()).
  bool profile = false;
  // With profile: wait for a device after each node, so that the times are the
  // device's (Note [Profiling a device] in executor.h); evals run slower.
  bool profile_device_time = false;
  // Record decode steps on a device and replay them (ExecutorOptions::record_runs).
  bool record_steps = true;
  // Progress of the weights' upload to a device backend
  // (ExecutorOptions::on_upload): bytes uploaded so far and in all.
  std::function<void(std::int64_t done, std::int64_t total)> on_upload;
  // Measured costs for the planner (PlanOptions::calibration); null: modelled.
  std::shared_ptr<const CalibrationProfile> calibration;
  // Let the planner take kernels that trade precision for speed, such as cuda's
  // TF32 product for f32 weights (PlanOptions::admit_precision_trades).
  bool admit_precision_trades = false;
  // Pack weights at load for the siblings that read them packed, where those win
  // (PlanOptions::pack_weights); the report says how much memory that takes.
  bool pack_weights = true;
  // Split the model over this many devices, tensor parallel (Note [Tensor-parallel
  // llama] in llama.cpp, docs/multi-gpu.md): each rank holds its share of the
  // heads, the feed-forward units, the embedding and the vocabulary, and
  // collectives (all_reduce, all_gather) join their partial results. 0 (the
  // default): one plan, no collectives; 1: one rank's plan with its collectives
  // as copies. On the cpu the ranks are threads of this process (simulated
  // devices, for the plan and the numerics); on cuda rank r runs on GPU r, its
  // collectives through NCCL (fewer GPUs than ranks: kUnavailable; a build
  // without NCCL: kUnimplemented). The kv heads, the embedding length and the
  // vocabulary must divide evenly (kInvalidArgument).
  int devices = 0;
};

// Time spent per op family and per node over the evals since the last
// reset_profile().
struct LlamaProfile {
  std::array<double, kOpFamilyCount> family_ns{};
  double copy_ns = 0;
  // Indexed by node of plan().graph(), summed over every bucket that ran; empty
  // until a profiled eval.
  std::vector<double> node_ns;
};

class LlamaModel {
 public:
  // Loads the model in `file` (which the model keeps alive: weights are borrowed
  // from its mapping). The registry is told that `options.backend` is the selected
  // backend (so its slow paths are violations, the CPU's included) and, when
  // `options.strict` is set, given that policy; both stay set on the registry. Errors: the config's
  // (from_gguf); kFailedPrecondition with a StrictKernelFailure payload when the strict policy
  // refuses a violation; kUnavailable for a backend this build lacks; the planner's miss when a
  // node has no kernel anywhere it may run.
  [[nodiscard]] static Result<LlamaModel> load(GgufFile file, const LlamaLoadOptions& options);

  LlamaModel(LlamaModel&&) noexcept;
  LlamaModel& operator=(LlamaModel&&) noexcept;
  ~LlamaModel();

  [[nodiscard]] const LlamaConfig& config() const;
  [[nodiscard]] const LlamaKernelReport& kernel_report() const;
  [[nodiscard]] const ExecutionPlan& plan() const;
  [[nodiscard]] std::int64_t max_context() const;
  [[nodiscard]] std::int64_t max_batch() const;
  // Tokens in the cache.
  [[nodiscard]] std::int64_t position() const;
  // The ranks the model is split over (LlamaLoadOptions::devices); 0 when not split.
  [[nodiscard]] int devices() const;

  // Runs `tokens` (1 to max_batch of them) at positions [position(), position() +
  // n), appends their keys and values to the cache and writes their logits,
  // [n, vocab_size] row-major, to `logits`; or, when `logits` holds vocab_size
  // floats, the last token's only, which skips the output head for the others
  // (what a prompt needs; Note [Logits of chosen rows] in llama.cpp). kInvalidArgument for a wrong
  // count or logits size, kOutOfRange for a token outside the vocabulary or a cache that would
  // overflow; kFailedPrecondition when a logit is NaN or infinite, naming the node that wrote the
  // first non-finite value (Note [Non-finite logits] in llama.cpp). On error the position does not
  // move.
  [[nodiscard]] Status eval(std::span<const std::int32_t> tokens, std::span<float> logits);
  // Empties the cache.
  void reset();
  // Runs every shape bucket once on an empty cache (a full prompt chunk, then one
  // token), then empties the cache and the profile, so that the first real eval
  // does not pay what a backend does once per shape: loading kernel code, choosing
  // library algorithms, growing scratch memory (Note [Warming up] in llama.cpp).
  // kFailedPrecondition unless the cache is empty.
  [[nodiscard]] Status warm_up();

  [[nodiscard]] const LlamaProfile& profile() const;
  void reset_profile();
  // The executor's counts: runs, recordings and replays, the host time of the
  // last step (ExecStats).
  [[nodiscard]] const ExecStats& executor_stats() const;

 private:
  struct State;
  explicit LlamaModel(std::unique_ptr<State> state);
  static Status load_rank(State& s, const LlamaLoadOptions& options, int rank, int ranks,
                          Registry& registry, Communicator* comm);
  static Status eval_rank(State& s, std::span<const std::int32_t> tokens, std::span<float> logits);
  static Status check_eval(const State& s, std::span<const std::int32_t> tokens,
                           std::span<const float> logits);
  std::unique_ptr<State> state_;
};

// The index of the largest logit, the first on a tie (greedy decoding). -1 for an
// empty span.
[[nodiscard]] std::int32_t argmax_token(std::span<const float> logits);

}  // namespace switchyard

namespace switchyard {

// The embedded default model of `switchyard run`: small enough to prefill and
// generate in seconds on two cores (vocab 512, dim 256, 4 blocks, 8 heads / 4 kv
// heads, ff 768), generated f32 by generate_synthetic_llama and then stored as
// quantized files mix types (quantize_synthetic_llama with
// default_synthetic_llama_types()).
[[nodiscard]] SyntheticLlamaConfig default_synthetic_llama_config();
// The synthetic shapes `switchyard run --synthetic` offers: "tiny" (the embedded
// default above) and the shapes of Llama-3.2-1B ("llama3-1b": dim 2048, 16
// blocks, 32 heads / 8 kv heads, ff 8192, vocab 128256, tied embeddings) and
// Llama-3.1-8B ("llama3-8b": dim 4096, 32 blocks, 32 / 8 heads, ff 14336, vocab
// 128256), with random weights: a real model's size and speed without its file.
[[nodiscard]] std::span<const std::string_view> synthetic_llama_presets();
// kInvalidArgument for a name that is no preset, listing the presets.
[[nodiscard]] Result<SyntheticLlamaConfig> synthetic_llama_preset(std::string_view name);
// q4_k for most matrices, q8_0 for attn_v, q6_k for ffn_down and output.
[[nodiscard]] std::vector<TensorTypeRule> default_synthetic_llama_types();

// Re-stores every f32 matrix weight of `model` whose role a rule names in that
// rule's dtype (f16, bf16 or any quantizable block type), so a generated model can
// carry the quantized types the generator itself does not produce. The first rule
// naming a role wins. kInvalidArgument for a rule naming an unknown role or a
// dtype that cannot store the tensor (its rows not whole blocks: the message
// names the tensor and the dtype).
[[nodiscard]] Status quantize_synthetic_llama(SyntheticModel& model,
                                              std::span<const TensorTypeRule> rules);

}  // namespace switchyard
