// Model quantization: per-tensor type rules, the k-quant mix presets, and a
// streaming conversion that writes the output chunk by chunk through GgufWriter.
#include "switchyard/quantize_model.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>
#include <mutex>
#include <system_error>

#include <fmt/format.h>

#include "switchyard/quant.h"

namespace switchyard {
namespace {

// Types a weight can be stored in: dtype.def's weight formats (the dense float types
// and the block formats except the activation-only q8_1 and q8_k), as far as
// quant.h quantizes them.
bool storable(DType t) { return is_weight_format(t) && (!is_quantized(t) || can_quantize(t)); }

constexpr std::string_view kStorableText =
    "f32, f16, bf16 or a block-quantized weight format (q8_1 and q8_k are for activations)";

struct Preset {
  std::string_view name;
  DType base;
  std::uint32_t file_type;
};

constexpr std::array<Preset, 4> kPresets = {{
    {"q4_k_m", DType::kQ4_K, 15},
    {"q5_k_m", DType::kQ5_K, 17},
    {"q4_k_s", DType::kQ4_K, 14},
    {"q5_k_s", DType::kQ5_K, 16},
}};

constexpr std::array<std::string_view, kPresets.size()> kPresetNames = {
    kPresets[0].name, kPresets[1].name, kPresets[2].name, kPresets[3].name};

// The "more bits" blocks of the _m mixes: the first and last eighth of the blocks,
// which errors matter most in, and every third block between.
bool use_more_bits(std::int64_t i, std::int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// Glob match of one name component: `*` any run, `?` one character.
bool glob_match(std::string_view p, std::string_view s) {
  std::size_t pi = 0, si = 0;
  std::size_t star = std::string_view::npos, resume = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi;
      ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      resume = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++resume;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::vector<std::string_view> split_dots(std::string_view s) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

// The N of a `blk.N.` name, or nullopt.
std::optional<std::int64_t> block_index(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  const char* begin = name.data() + kPrefix.size();
  const char* end = name.data() + name.size();
  std::int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(begin, end, n);
  if (ec != std::errc() || ptr == begin || ptr == end || *ptr != '.' || n < 0) return std::nullopt;
  return n;
}

// The type a tensor falls back to when `t`'s blocks do not divide its rows.
DType fallback_for(DType t, std::int64_t row) {
  DType f = DType::kF16;
  switch (t) {
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kIQ4_XS: f = DType::kIQ4_NL; break;
    case DType::kQ4_K: f = DType::kQ5_0; break;
    case DType::kQ5_K: f = DType::kQ5_1; break;
    case DType::kQ6_K: f = DType::kQ8_0; break;
    default: break;
  }
  return row % block_elems(f) == 0 ? f : DType::kF16;
}

std::string rule_text(const QuantizeRule& r) {
  return fmt::format("{}={}", r.pattern, name(r.dtype));
}

// Converts `rows` rows starting at input row `first_row` into `out`, in parallel
// over rows. On failure reports the lowest failing row, whatever the thread count.
Status convert_rows(const TensorQuantizeDecision& d, std::span<const std::byte> input,
                    std::int64_t first_row, std::int64_t rows, std::span<std::byte> out,
                    ParallelRunner* runner) {
  const std::int64_t inner = d.shape.inner();
  const auto in_row = static_cast<std::size_t>(*row_bytes(d.from, inner));
  const auto out_row = static_cast<std::size_t>(*row_bytes(d.to, inner));
  const std::byte* src = input.data() + static_cast<std::size_t>(first_row) * in_row;
  if (d.copy) {
    std::memcpy(out.data(), src, out.size());
    return Status::ok();
  }
  std::mutex mutex;
  std::int64_t failed_row = -1;
  Status failure;
  auto body = [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> f32(static_cast<std::size_t>(inner));
    for (std::int64_t r = begin; r < end; ++r) {
      Status st =
          row_to_f32(d.from, std::span(src + static_cast<std::size_t>(r) * in_row, in_row), f32);
      if (st.is_ok()) {
        st = row_from_f32(d.to, f32, out.subspan(static_cast<std::size_t>(r) * out_row, out_row));
      }
      if (!st.is_ok()) {
        std::lock_guard lock(mutex);
        if (failed_row < 0 || r < failed_row) {
          failed_row = r;
          failure = std::move(st);
        }
        return;
      }
    }
  };
  if (runner != nullptr && runner->num_threads() > 1 && rows > 1) {
    runner->parallel_for(rows, 1, body);
  } else {
    body(0, rows);
  }
  if (failed_row >= 0) {
    return failure.with_context(
        fmt::format("row {} of {}", first_row + failed_row, d.shape.outer()));
  }
  return Status::ok();
}

}  // namespace

bool tensor_name_matches(std::string_view pattern, std::string_view name) {
  const std::vector<std::string_view> p = split_dots(pattern);
  const std::vector<std::string_view> n = split_dots(name);
  if (p.size() > n.size()) return false;
  for (std::size_t start = 0; start + p.size() <= n.size(); ++start) {
    bool all = true;
    for (std::size_t j = 0; j < p.size() && all; ++j) all = glob_match(p[j], n[start + j]);
    if (all) return true;
  }
  return false;
}

Result<QuantizeRule> parse_quantize_rule(std::string_view text) {
  const std::size_t eq = text.rfind('=');
  if (eq == std::string_view::npos) {
    return invalid_argument_error(
        fmt::format("tensor type rule '{}': expected PATTERN=TYPE, e.g. ffn_down=q6_k", text));
  }
  const std::string_view pattern = text.substr(0, eq);
  const std::string_view type = text.substr(eq + 1);
  if (pattern.empty()) {
    return invalid_argument_error(fmt::format("tensor type rule '{}': the pattern is empty", text));
  }
  for (char c : pattern) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '=') {
      return invalid_argument_error(fmt::format(
          "tensor type rule '{}': the pattern holds '{}'; tensor names have no spaces or '='", text,
          c == '=' ? "=" : "whitespace"));
    }
  }
  for (std::string_view component : split_dots(pattern)) {
    if (component.empty()) {
      return invalid_argument_error(fmt::format(
          "tensor type rule '{}': the pattern has an empty component (a leading, trailing or "
          "doubled '.')",
          text));
    }
  }
  Result<DType> dtype = parse_dtype(type);
  if (!dtype.is_ok()) {
    return invalid_argument_error(
        fmt::format("tensor type rule '{}': unknown type '{}'; use {}", text, type, kStorableText));
  }
  if (!storable(*dtype)) {
    return invalid_argument_error(
        fmt::format("tensor type rule '{}': weights cannot be stored as {}; use {}", text,
                    name(*dtype), kStorableText));
  }
  return QuantizeRule{std::string(pattern), *dtype};
}

std::span<const std::string_view> quantize_presets() { return kPresetNames; }

Result<QuantizeTarget> parse_quantize_target(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const Preset& p : kPresets) {
    if (p.name == lower) return QuantizeTarget{lower, p.base, true, p.file_type};
  }
  auto accepted = [] {
    std::vector<std::string_view> names;
    for (DType t : kAllDTypes) {
      if (storable(t) && gguf_file_type(t)) names.push_back(name(t));
    }
    return fmt::format("a preset ({}) or a type ({})", fmt::join(kPresetNames, ", "),
                       fmt::join(names, ", "));
  };
  Result<DType> dtype = parse_dtype(lower);
  if (!dtype.is_ok()) {
    return invalid_argument_error(
        fmt::format("quantize type '{}' is unknown; expected {}", text, accepted()));
  }
  const std::optional<std::uint32_t> file_type = gguf_file_type(*dtype);
  if (!storable(*dtype) || !file_type) {
    return invalid_argument_error(
        fmt::format("quantize type '{}': a model cannot be stored as {}; expected {}", text, lower,
                    accepted()));
  }
  return QuantizeTarget{lower, *dtype, false, *file_type};
}

std::vector<QuantizeRule> preset_rules(const QuantizeTarget& target, std::int64_t block_count,
                                       bool has_output) {
  std::vector<QuantizeRule> rules;
  if (!target.preset) return rules;
  rules.push_back({has_output ? "output" : "token_embd", DType::kQ6_K});
  const std::int64_t n = block_count;
  const bool medium = target.name.ends_with("_m");
  const bool q4_k_s = target.name == "q4_k_s";
  for (std::int64_t i = 0; i < n; ++i) {
    DType attn_v = target.base, ffn_down = target.base;
    if (medium && use_more_bits(i, n)) {
      attn_v = ffn_down = DType::kQ6_K;
    } else if (q4_k_s) {
      if (i < 4) attn_v = DType::kQ5_K;
      if (i < n / 8) ffn_down = DType::kQ5_K;
    }
    if (attn_v != target.base) rules.push_back({fmt::format("blk.{}.attn_v", i), attn_v});
    if (ffn_down != target.base) rules.push_back({fmt::format("blk.{}.ffn_down", i), ffn_down});
  }
  return rules;
}

Result<QuantizePlan> plan_quantization(const GgufFile& input, const QuantizeOptions& options) {
  QuantizePlan plan;
  SWITCHYARD_ASSIGN_OR_RETURN(plan.target, parse_quantize_target(options.type));
  for (const QuantizeRule& r : options.rules) {
    if (!storable(r.dtype)) {
      return invalid_argument_error(
          fmt::format("tensor type rule '{}': weights cannot be {}", rule_text(r), name(r.dtype)));
    }
  }
  bool has_output = false;
  // Block indices come from tensor names: the presets make rules per block, so an
  // index is bounded by the tensor count (each block holds at least one tensor)
  // before any rule is made for it.
  const auto tensor_count = static_cast<std::int64_t>(input.tensors().size());
  for (const GgufTensorInfo& t : input.tensors()) {
    if (std::optional<std::int64_t> b = block_index(t.name)) {
      if (*b >= tensor_count) {
        return invalid_argument_error(fmt::format(
            "tensor '{}': block index {} is not below the file's {} tensors, so the blocks are "
            "not numbered from 0 as a model's are",
            printable(t.name), *b, tensor_count));
      }
      plan.block_count = std::max(plan.block_count, *b + 1);
    }
    has_output = has_output || t.name == "output.weight";
  }
  plan.preset_rules = preset_rules(plan.target, plan.block_count, has_output);

  for (const GgufTensorInfo& t : input.tensors()) {
    TensorQuantizeDecision d;
    d.name = t.name;
    d.shape = t.shape;
    d.from = t.dtype;
    d.input_bytes = t.size_bytes;
    const bool convertible = t.dtype == DType::kF32 || t.dtype == DType::kF16 ||
                             t.dtype == DType::kBF16 || is_quantized(t.dtype);
    if (t.shape.rank() == 1) {
      const bool widen = t.dtype == DType::kF16 || t.dtype == DType::kBF16;
      d.to = widen ? DType::kF32 : t.dtype;
      d.reason = t.dtype == DType::kF32 || widen ? "1-D tensor: f32" : "1-D tensor: copied";
    } else if (!convertible) {
      d.to = t.dtype;
      d.reason = fmt::format("{} tensor: copied", name(t.dtype));
    } else {
      auto match = [&](std::span<const QuantizeRule> rules) -> const QuantizeRule* {
        for (const QuantizeRule& r : rules) {
          if (tensor_name_matches(r.pattern, t.name)) return &r;
        }
        return nullptr;
      };
      if (const QuantizeRule* r = match(options.rules)) {
        d.to = r->dtype;
        d.reason = fmt::format("rule {}", rule_text(*r));
      } else if (const QuantizeRule* p = match(plan.preset_rules)) {
        d.to = p->dtype;
        d.reason = fmt::format("{}: {}", plan.target.name, p->pattern);
      } else {
        d.to = plan.target.base;
        d.reason = fmt::format("base type {}", name(plan.target.base));
      }
      if (t.shape.inner() % block_elems(d.to) != 0) {
        d.fallback_from = d.to;
        d.to = fallback_for(d.to, t.shape.inner());
        d.reason +=
            fmt::format("; rows of {} are not whole {} blocks of {}: {} instead", t.shape.inner(),
                        name(*d.fallback_from), block_elems(*d.fallback_from), name(d.to));
      }
      if (is_quantized(t.dtype) && d.to != t.dtype && !options.allow_requantize) {
        return invalid_argument_error(fmt::format(
            "tensor '{}' is already quantized ({}); storing it as {} would dequantize and "
            "quantize it again, which is refused unless requantizing is allowed "
            "(--allow-requantize)",
            t.name, name(t.dtype), name(d.to)));
      }
    }
    d.copy = d.to == d.from;
    SWITCHYARD_ASSIGN_OR_RETURN(std::int64_t out_row, row_bytes(d.to, t.shape.inner()));
    d.output_bytes = out_row * t.shape.outer();
    plan.tensors.push_back(std::move(d));
  }
  return plan;
}

GgufMetadata quantized_metadata(const GgufFile& input, const QuantizePlan& plan) {
  GgufMetadata m;
  for (const GgufMetadata::Entry& e : input.metadata().entries()) m.set(e.key, e.value);
  m.set("general.file_type", GgufValue::u32(plan.target.file_type));
  m.set("general.quantization_version", GgufValue::u32(kQuantizationVersion));
  return m;
}

Status write_quantized(const GgufFile& input, const QuantizePlan& plan,
                       const std::filesystem::path& path, const QuantizeOptions& options) {
  if (plan.tensors.size() != input.tensors().size()) {
    return invalid_argument_error(
        fmt::format("quantize: the plan has {} tensors but the input has {}", plan.tensors.size(),
                    input.tensors().size()));
  }
  GgufWriter writer;
  writer.metadata() = quantized_metadata(input, plan);
  std::int64_t total = 0;
  for (const TensorQuantizeDecision& d : plan.tensors) total += d.output_bytes;
  std::int64_t done = 0;
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorQuantizeDecision& d = plan.tensors[i];
    const GgufTensorInfo& info = input.tensors()[i];
    if (info.name != d.name || info.dtype != d.from || info.shape != d.shape) {
      return invalid_argument_error(fmt::format(
          "quantize: the plan's tensor {} ('{}') is not the input's ('{}')", i, d.name, info.name));
    }
    const std::span<const std::byte> bytes = input.tensor_bytes(info);
    const std::int64_t out_row = d.output_bytes / d.shape.outer();
    auto source = [&, i, bytes, out_row](std::int64_t first, std::int64_t rows,
                                         std::span<std::byte> out) {
      const TensorQuantizeDecision& dec = plan.tensors[i];
      // Announce the tensor before its first chunk, so a long conversion shows its name.
      if (first == 0 && options.progress) {
        options.progress(QuantizeProgress{i, plan.tensors.size(), dec.name, done, total});
      }
      SWITCHYARD_RETURN_IF_ERROR(convert_rows(dec, bytes, first, rows, out, options.runner));
      done += rows * out_row;
      if (options.progress) {
        options.progress(QuantizeProgress{i, plan.tensors.size(), dec.name, done, total});
      }
      return Status::ok();
    };
    SWITCHYARD_RETURN_IF_ERROR(writer.add_tensor_source(d.name, d.to, d.shape, std::move(source)));
  }
  return writer.write(path);
}

Result<QuantizeSummary> quantize_gguf(const std::filesystem::path& input,
                                      const std::filesystem::path& output,
                                      const QuantizeOptions& options) {
  SWITCHYARD_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(input));
  std::error_code ec;
  const bool same = input == output || (std::filesystem::exists(output, ec) &&
                                        std::filesystem::equivalent(input, output, ec));
  if (same) {
    return invalid_argument_error(fmt::format(
        "quantize: the output '{}' is the input file; write the quantized copy elsewhere",
        output.string()));
  }
  QuantizeSummary summary;
  SWITCHYARD_ASSIGN_OR_RETURN(summary.plan, plan_quantization(file, options));
  SWITCHYARD_RETURN_IF_ERROR(write_quantized(file, summary.plan, output, options));
  summary.input_file_bytes = file.file_size();
  summary.output_file_bytes = std::filesystem::file_size(output, ec);
  for (const TensorQuantizeDecision& d : summary.plan.tensors) {
    summary.input_tensor_bytes += d.input_bytes;
    summary.output_tensor_bytes += d.output_bytes;
  }
  return summary;
}

}  // namespace switchyard
