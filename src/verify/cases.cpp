#include "verify/cases.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "verify/reference.h"

namespace switchyard::verify_detail {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Status unsupported(OpKind op, const DTypeList& dtypes, std::string_view why) {
  return unimplemented_error(
      fmt::format("no case generator for {}({}): {}", name(op), dtypes.to_string(), why));
}

bool is_int(DType t) { return info(t).kind == DTypeKind::kInt; }
bool is_dense(DType t) { return !is_quantized(t); }

class Gen {
 public:
  explicit Gen(std::mt19937_64& rng) : rng_(rng) {}

  std::vector<double> uniform(std::int64_t n, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (double& x : v) x = dist(rng_);
    return v;
  }
  std::vector<double> integers(std::int64_t n, std::int64_t lo, std::int64_t hi) {
    std::uniform_int_distribution<std::int64_t> dist(lo, hi);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (double& x : v) x = static_cast<double>(dist(rng_));
    return v;
  }
  // Values for a table or activation of `dtype`: floats in [-range, range], integers
  // in a small symmetric range clipped to the dtype.
  std::vector<double> data(DType dtype, std::int64_t n, double range = 1.0) {
    if (is_float(dtype) || is_quantized(dtype)) return uniform(n, -range, range);
    const auto lo = static_cast<std::int64_t>(std::max(-100.0, int_dtype_min(dtype)));
    const auto hi = static_cast<std::int64_t>(std::min(100.0, int_dtype_max(dtype)));
    return integers(n, lo, hi);
  }

 private:
  std::mt19937_64& rng_;
};

InputSpec spec(std::string role, DType dtype, Shape shape, std::vector<double> values) {
  return {.role = std::move(role), .dtype = dtype, .shape = shape, .values = std::move(values)};
}

Shape shape_of(std::vector<std::int64_t> dims) {
  return Shape(std::span<const std::int64_t>(dims));
}

// Adds a copy of `base` with every dense input strided, when the caps accept it.
void add_strided(std::vector<Case>& cases, const KernelCaps& caps, Case base) {
  if (!caps.strided_input) return;
  bool any = false;
  for (InputSpec& in : base.inputs) {
    if (is_dense(in.dtype) && in.shape.numel() > 1) {
      in.strided = true;
      any = true;
    }
  }
  if (any) cases.push_back(std::move(base));
}

bool all_same_float(const DTypeList& d) {
  for (DType t : d.span()) {
    if (!is_float(t) || t != d[0]) return false;
  }
  return true;
}

bool all_dense_float(const DTypeList& d) {
  for (DType t : d.span()) {
    if (!is_float(t)) return false;
  }
  return true;
}

const std::vector<std::vector<std::int64_t>>& elementwise_shapes() {
  static const std::vector<std::vector<std::int64_t>> kShapes = {{1}, {17}, {4, 33}, {2, 3, 19}};
  return kShapes;
}

Result<std::vector<Case>> binary_cases(OpKind op, const DTypeList& d, const KernelCaps& caps,
                                       Gen& g) {
  if (d.size() != 3 || !all_same_float(d))
    return unsupported(op, d, "takes a, b, out of one float dtype");
  auto b_values = [&](std::int64_t n) {
    if (op != OpKind::kDiv) return g.uniform(n, -1.0, 1.0);
    // Divisors away from zero, either sign.
    std::vector<double> v = g.uniform(n, 0.5, 2.0);
    std::vector<double> sign = g.uniform(n, -1.0, 1.0);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = sign[i] < 0 ? -v[i] : v[i];
    return v;
  };
  auto make = [&](const std::vector<std::int64_t>& dims) {
    const Shape s = shape_of(dims);
    Case c;
    c.inputs = {spec("a", d[0], s, g.uniform(s.numel(), -1.0, 1.0)),
                spec("b", d[1], s, b_values(s.numel()))};
    return c;
  };
  std::vector<Case> cases;
  if (!caps.requires_broadcast) {
    for (const auto& dims : elementwise_shapes()) cases.push_back(make(dims));
    add_strided(cases, caps, make({5, 19}));
  }
  if (caps.broadcast_input || caps.requires_broadcast) {
    // b as a row vector, a as a column, and a 3-d b broadcast in two dims.
    Case row = make({5, 19});
    row.inputs[1].broadcast_mask = 1u << 0;
    cases.push_back(std::move(row));
    Case col = make({6, 9});
    col.inputs[0].broadcast_mask = 1u << 1;
    cases.push_back(std::move(col));
    Case two = make({2, 3, 9});
    two.inputs[1].broadcast_mask = (1u << 0) | (1u << 2);
    cases.push_back(std::move(two));
  }
  return cases;
}

// The interval a unary op's inputs are drawn from.
struct Domain {
  double lo, hi;
};
// Through the tails of the s-shaped functions.
constexpr Domain kWide{-6.0, 6.0};

// The inputs a unary op is checked on: kWide, or the op's domain where that is
// narrower (or where larger inputs only overflow). A new unary op needs a line
// here only then.
Domain unary_domain(OpKind op) {
  switch (op) {
    case OpKind::kExp: return {-10.0, 10.0};
    case OpKind::kSqrt:
    case OpKind::kRsqrt: return {0.01, 100.0};
    case OpKind::kScale: return {-4.0, 4.0};
    default: return kWide;
  }
}

Result<std::vector<Case>> unary_cases(OpKind op, const DTypeList& d, const KernelCaps& caps, Gen& g,
                                      Domain domain) {
  if (d.size() != 2 || !all_same_float(d))
    return unsupported(op, d, "takes x, out of one float dtype");
  auto make = [&](const std::vector<std::int64_t>& dims) {
    const Shape s = shape_of(dims);
    Case c;
    c.inputs = {spec("x", d[0], s, g.uniform(s.numel(), domain.lo, domain.hi))};
    if (op == OpKind::kScale) {
      c.params.scale = 1.7f;
      c.note = "scale=1.7";
    }
    return c;
  };
  std::vector<Case> cases;
  if (!caps.requires_broadcast) {
    for (const auto& dims : elementwise_shapes()) cases.push_back(make(dims));
    add_strided(cases, caps, make({5, 19}));
  }
  if (caps.broadcast_input || caps.requires_broadcast) {
    Case row = make({4, 19});
    row.inputs[0].broadcast_mask = 1u << 0;
    cases.push_back(std::move(row));
  }
  return cases;
}

Result<std::vector<Case>> cast_cases(const DTypeList& d, const KernelCaps& caps, Gen& g) {
  constexpr OpKind kOp = OpKind::kCast;
  if (d.size() != 2) return unsupported(kOp, d, "takes x, out");
  const DType src = d[0], dst = d[1];
  if (is_quantized(dst)) return unsupported(kOp, d, "a quantized output has no elementwise check");
  auto values = [&](std::int64_t n) -> std::vector<double> {
    if (src == DType::kBool) return g.integers(n, 0, 1);
    if (is_quantized(src)) return g.uniform(n, -1.0, 1.0);
    if (is_int(src)) {
      // Integers that both sides hold (and that stay finite in f16).
      double lo = int_dtype_min(src), hi = int_dtype_max(src);
      if (is_int(dst) || dst == DType::kBool) {
        lo = std::max(lo, int_dtype_min(dst));
        hi = std::min(hi, int_dtype_max(dst));
      }
      const double cap = dst == DType::kF16 ? 60000.0 : 1e6;
      lo = std::max(lo, -cap);
      hi = std::min(hi, cap);
      return g.integers(n, static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi));
    }
    // Floating source: what the source can hold finitely.
    const double src_cap = src == DType::kF16 ? 60000.0 : 1e30;
    std::vector<double> v = g.uniform(n, -1.0, 1.0);
    if (is_int(dst) || dst == DType::kBool) {
      // Up to 1.5x the destination's range (saturation), halves (ties to even),
      // and one NaN (which converts to 0).
      const double range = std::min(1.5 * int_dtype_max(dst), src_cap);
      const std::vector<double> wide = g.uniform(n, -range, range);
      const std::vector<double> small = g.integers(n, -20, 20);
      for (std::int64_t i = 0; i < n; ++i) {
        if (i % 3 == 1) v[i] = wide[i];
        if (i % 3 == 2) v[i] = small[i] + 0.5;
      }
      if (n > 4) v[static_cast<std::size_t>(n / 2)] = std::numeric_limits<double>::quiet_NaN();
      return v;
    }
    // Float to float: unit values, large values inside both ranges, and tiny ones
    // that become subnormal in f16.
    const double big = std::min(dst == DType::kF16 ? 60000.0 : 1e4, src_cap);
    const std::vector<double> wide = g.uniform(n, -big, big);
    const std::vector<double> tiny = g.uniform(n, -1e-5, 1e-5);
    for (std::int64_t i = 0; i < n; ++i) {
      if (i % 3 == 1) v[i] = wide[i];
      if (i % 3 == 2) v[i] = tiny[i];
    }
    return v;
  };
  std::vector<std::vector<std::int64_t>> shapes = {{1}, {17}, {3, 41}};
  if (is_quantized(src)) {
    const std::int64_t block = block_elems(src);
    shapes = {{1, block}, {3, 256}};
  }
  std::vector<Case> cases;
  for (const auto& dims : shapes) {
    const Shape s = shape_of(dims);
    Case c;
    c.inputs = {spec("x", src, s, values(s.numel()))};
    cases.push_back(std::move(c));
  }
  if (!is_quantized(src)) {
    Case c;
    const Shape s{5, 19};
    c.inputs = {spec("x", src, s, values(s.numel()))};
    add_strided(cases, caps, std::move(c));
  }
  return cases;
}

Result<std::vector<Case>> matmul_cases(const DTypeList& d, const KernelCaps& caps, Gen& g) {
  constexpr OpKind kOp = OpKind::kMatmul;
  if (d.size() != 3 || !is_float(d[0]) || !is_float(d[2]) ||
      !(is_float(d[1]) || is_quantized(d[1]))) {
    return unsupported(kOp, d, "takes a (float), w (float or quantized), out (float)");
  }
  struct Config {
    std::vector<std::int64_t> batch;
    std::int64_t m, n, k;
    bool batched_weights;
  };
  std::vector<Config> configs;
  if (is_quantized(d[1])) {
    const std::int64_t block = block_elems(d[1]);
    // The last has enough rows for the prompt siblings that admit only many
    // (the CUDA bf16 tiles).
    configs = {{{}, 1, 5, 256, false},
               {{}, 3, 4, block == 32 ? 96 : 512, false},
               {{2}, 2, 3, 256, false},
               {{}, 20, 6, 256, false}};
  } else {
    // The long row takes the unrolled loop of matrix-vector kernels (a few
    // rows, several loads in flight per lane) and a remainder; the last has
    // enough rows for the prompt siblings that admit only many (the CUDA bf16
    // tensor-core products).
    configs = {{{}, 1, 1, 1, false},     {{}, 1, 13, 67, false}, {{}, 4, 9, 40, false},
               {{}, 7, 16, 32, false},   {{2}, 3, 5, 19, false}, {{2}, 3, 4, 24, true},
               {{}, 2, 33, 2056, false}, {{}, 20, 24, 96, false}};
  }
  auto make = [&](const Config& c) {
    std::vector<std::int64_t> a_dims = c.batch, w_dims;
    a_dims.insert(a_dims.end(), {c.m, c.k});
    if (c.batched_weights) w_dims = c.batch;
    w_dims.insert(w_dims.end(), {c.n, c.k});
    const Shape as = shape_of(a_dims), ws = shape_of(w_dims);
    Case out;
    out.inputs = {spec("a", d[0], as, g.uniform(as.numel(), -1.0, 1.0)),
                  spec("w", d[1], ws, g.uniform(ws.numel(), -1.0, 1.0))};
    return out;
  };
  std::vector<Case> cases;
  for (const Config& c : configs) cases.push_back(make(c));
  add_strided(cases, caps, make(configs[1]));
  return cases;
}

Result<std::vector<Case>> norm_cases(OpKind op, const DTypeList& d, const KernelCaps& caps,
                                     Gen& g) {
  std::size_t lo = 2, hi = 3;
  if (op == OpKind::kLayerNorm) hi = 4;
  if (op == OpKind::kRmsNormMul) lo = 3;
  if (d.size() < lo || d.size() > hi || !all_dense_float(d)) {
    return unsupported(op, d, fmt::format("takes {} to {} float operands", lo, hi));
  }
  const std::size_t inputs = d.size() - 1;
  // Short rows, odd ones and long ones: the CUDA rms_norm holds a row of up to
  // 8192 f32 (16384 f16 or bf16) values in its block's registers and walks
  // longer ones.
  const std::vector<std::vector<std::int64_t>> shapes = {{1},     {3, 17},   {2, 2, 65},
                                                         {4, 64}, {2, 4104}, {1, 8200}};
  auto make = [&](const std::vector<std::int64_t>& dims, float eps) {
    const Shape s = shape_of(dims);
    const std::int64_t dd = s.inner();
    Case c;
    c.inputs.push_back(spec("x", d[0], s, g.uniform(s.numel(), -2.0, 2.0)));
    if (inputs >= 2) c.inputs.push_back(spec("w", d[1], Shape{dd}, g.uniform(dd, -2.0, 2.0)));
    if (inputs >= 3) c.inputs.push_back(spec("b", d[2], Shape{dd}, g.uniform(dd, -1.0, 1.0)));
    c.params.eps = eps;
    c.note = fmt::format("eps={:g}", eps);
    return c;
  };
  std::vector<Case> cases;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    cases.push_back(make(shapes[i], i == 2 ? 1e-3f : 1e-5f));
  add_strided(cases, caps, make({3, 17}, 1e-5f));
  return cases;
}

Result<std::vector<Case>> softmax_cases(const DTypeList& d, const KernelCaps& caps, Gen& g) {
  constexpr OpKind kOp = OpKind::kSoftmax;
  if ((d.size() != 2 && d.size() != 3) || !all_dense_float(d)) {
    return unsupported(kOp, d, "takes x [, mask], out (float)");
  }
  const bool has_mask = d.size() == 3;
  struct Config {
    std::vector<std::int64_t> dims;
    float scale;
    bool causal;
    std::int64_t query_offset;
  };
  const std::vector<Config> configs = {{{1, 1}, 1.0f, false, 0},
                                       {{3, 17}, 0.7f, false, 0},
                                       {{2, 4, 33}, 1.0f, true, 29},
                                       {{5, 9}, 1.0f, true, -1}};
  auto make = [&](const Config& cfg) {
    const Shape s = shape_of(cfg.dims);
    const std::int64_t c = s.inner(), r = s[s.rank() - 2];
    Case out;
    out.inputs.push_back(spec("x", d[0], s, g.uniform(s.numel(), -4.0, 4.0)));
    if (has_mask) {
      std::vector<double> mask = g.uniform(r * c, -2.0, 0.0);
      for (std::size_t i = 3; i < mask.size(); i += 5) mask[i] = kNegInf;
      out.inputs.push_back(spec("mask", d[1], Shape{r, c}, std::move(mask)));
    }
    out.params.scale = cfg.scale;
    out.params.causal = cfg.causal;
    out.params.query_offset = cfg.query_offset;
    out.note = cfg.causal
                   ? fmt::format("scale={:g} causal query_offset={}", cfg.scale, cfg.query_offset)
                   : fmt::format("scale={:g}", cfg.scale);
    return out;
  };
  std::vector<Case> cases;
  for (const Config& cfg : configs) cases.push_back(make(cfg));
  add_strided(cases, caps, make(configs[1]));
  return cases;
}

Result<std::vector<Case>> rope_cases(const DTypeList& d, const KernelCaps& caps, Gen& g) {
  constexpr OpKind kOp = OpKind::kRope;
  const bool factored = d.size() == 4;
  if ((d.size() != 3 && !factored) || !is_float(d[0]) || !is_int(d[1]) ||
      !is_float(d[d.size() - 1]) || (factored && d[2] != DType::kF32)) {
    return unsupported(kOp, d,
                       "takes x (float), pos (integer), optionally f32 frequency factors, out "
                       "(float)");
  }
  struct Config {
    std::vector<std::int64_t> dims;
    RopeMode mode;
    int rope_dims;
  };
  const std::vector<Config> configs = {{{1, 1, 2}, RopeMode::kNormal, 0},
                                       {{5, 3, 16}, RopeMode::kNormal, 0},
                                       {{5, 3, 16}, RopeMode::kNeox, 0},
                                       {{2, 4, 2, 24}, RopeMode::kNeox, 16},
                                       {{3, 2, 10}, RopeMode::kNormal, 6},
                                       // Heads past a group of four (the CUDA kernel's
                                       // angle sharing), an odd head size's tail.
                                       {{2, 9, 12}, RopeMode::kNeox, 8},
                                       {{3, 6, 7}, RopeMode::kNormal, 4}};
  auto make = [&](const Config& cfg) {
    const Shape s = shape_of(cfg.dims);
    const std::int64_t t = s[s.rank() - 3];
    Case c;
    c.inputs = {spec("x", d[0], s, g.uniform(s.numel(), -2.0, 2.0)),
                spec("pos", d[1], Shape{t}, g.integers(t, 0, 40))};
    if (factored) {
      // Factors as long-context scalings have them: 1 for fast pairs, up to 8
      // for slow ones.
      const std::int64_t half = (cfg.rope_dims == 0 ? s.inner() : cfg.rope_dims) / 2;
      c.inputs.push_back(spec("factors", DType::kF32, Shape{half}, g.uniform(half, 1.0, 8.0)));
    }
    c.params.rope_mode = cfg.mode;
    c.params.rope_dims = cfg.rope_dims;
    c.note = fmt::format("{} rope_dims={}", cfg.mode == RopeMode::kNormal ? "normal" : "neox",
                         cfg.rope_dims);
    return c;
  };
  std::vector<Case> cases;
  for (const Config& cfg : configs) cases.push_back(make(cfg));
  add_strided(cases, caps, make(configs[2]));
  return cases;
}

Result<std::vector<Case>> get_rows_cases(const DTypeList& d, const KernelCaps& caps, Gen& g) {
  constexpr OpKind kOp = OpKind::kGetRows;
  if (d.size() != 3 || !is_int(d[1]) || !is_float(d[2])) {
    return unsupported(kOp, d, "takes table, idx (integer), out (float)");
  }
  struct Config {
    std::int64_t rows, cols, n;
  };
  std::vector<Config> configs = {{5, 7, 3}, {1, 1, 1}, {9, 64, 6}};
  if (is_quantized(d[0])) configs = {{4, 256, 3}, {3, 512, 2}};
  auto make = [&](const Config& cfg) {
    Case c;
    std::vector<double> idx = g.integers(cfg.n, 0, cfg.rows - 1);
    // The first and the last row are always read; a repeat is likely.
    idx[0] = static_cast<double>(cfg.rows - 1);
    if (cfg.n > 1) idx[1] = 0.0;
    c.inputs = {
        spec("table", d[0], Shape{cfg.rows, cfg.cols}, g.data(d[0], cfg.rows * cfg.cols, 3.0)),
        spec("idx", d[1], Shape{cfg.n}, std::move(idx))};
    return c;
  };
  std::vector<Case> cases;
  for (const Config& cfg : configs) cases.push_back(make(cfg));
  if (!is_quantized(d[0])) add_strided(cases, caps, make(configs[0]));
  return cases;
}

Result<std::vector<Case>> set_rows_cases(const DTypeList& d, const KernelCaps& caps, Gen& g) {
  constexpr OpKind kOp = OpKind::kSetRows;
  if (d.size() != 4 || !(is_float(d[0]) || is_quantized(d[0])) || !is_float(d[1]) ||
      !is_int(d[2]) || d[3] != d[0]) {
    return unsupported(kOp, d,
                       "takes dst (float or quantized), src (float), idx (integer), out (dst's)");
  }
  struct Config {
    std::int64_t rows, cols, n;
  };
  // One row of a cache (a decode step), a prompt's rows, every row; a quantized
  // cache's rows are whole blocks.
  const bool quantized = is_quantized(d[0]);
  const std::int64_t block = block_elems(d[0]);
  const std::vector<Config> configs =
      quantized ? std::vector<Config>{{7, block, 1}, {9, 2 * block, 4}, {3, 3 * block, 3}}
                : std::vector<Config>{{7, 5, 1}, {9, 64, 4}, {3, 33, 3}};
  auto make = [&](const Config& cfg) {
    // Distinct indices (a repeat has no specified winner), the last row among them.
    std::vector<double> order(static_cast<std::size_t>(cfg.rows));
    for (std::int64_t r = 0; r < cfg.rows; ++r) order[static_cast<std::size_t>(r)] = double(r);
    for (std::int64_t r = cfg.rows - 1; r > 0; --r) {
      std::swap(order[static_cast<std::size_t>(r)],
                order[static_cast<std::size_t>(g.integers(1, 0, r)[0])]);
    }
    std::vector<double> idx(order.begin(), order.begin() + cfg.n);
    if (std::find(idx.begin(), idx.end(), double(cfg.rows - 1)) == idx.end()) {
      idx[0] = static_cast<double>(cfg.rows - 1);
    }
    Case c;
    c.inputs = {
        spec("dst", d[0], Shape{cfg.rows, cfg.cols}, g.data(d[0], cfg.rows * cfg.cols, 3.0)),
        spec("src", d[1], Shape{cfg.n, cfg.cols}, g.data(d[1], cfg.n * cfg.cols, 3.0)),
        spec("idx", d[2], Shape{cfg.n}, std::move(idx))};
    return c;
  };
  std::vector<Case> cases;
  for (const Config& cfg : configs) cases.push_back(make(cfg));
  if (!quantized) add_strided(cases, caps, make(configs[1]));
  return cases;
}

Result<std::vector<Case>> same_shape_cases(OpKind op, const DTypeList& d, const KernelCaps& caps,
                                           Gen& g,
                                           const std::vector<std::vector<std::int64_t>>& shapes) {
  if (d.size() != 2 || is_quantized(d[0]) || is_quantized(d[1])) {
    return unsupported(op, d, "takes x, out (dense)");
  }
  if ((op == OpKind::kSum || op == OpKind::kMean || op == OpKind::kMax) && !all_dense_float(d)) {
    return unsupported(op, d, "reductions take float operands");
  }
  if ((op == OpKind::kCopy || op == OpKind::kTranspose) && d[0] != d[1]) {
    return unsupported(op, d, "x and out share one dtype");
  }
  auto make = [&](const std::vector<std::int64_t>& dims) {
    const Shape s = shape_of(dims);
    Case c;
    c.inputs = {spec("x", d[0], s, g.data(d[0], s.numel()))};
    return c;
  };
  std::vector<Case> cases;
  for (const auto& dims : shapes) cases.push_back(make(dims));
  add_strided(cases, caps, make(shapes.back()));
  return cases;
}

Result<std::vector<Case>> concat_cases(const DTypeList& d, const KernelCaps& caps, Gen& g) {
  constexpr OpKind kOp = OpKind::kConcat;
  if (d.size() < 2) return unsupported(kOp, d, "takes x0, ..., out");
  for (DType t : d.span()) {
    if (is_quantized(t) || t != d[0]) return unsupported(kOp, d, "operands share one dense dtype");
  }
  const std::size_t n = d.size() - 1;
  auto make = [&](std::vector<std::int64_t> base, int axis) {
    Case c;
    const int rank = static_cast<int>(base.size());
    const int a = axis < 0 ? axis + rank : axis;
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<std::int64_t> dims = base;
      dims[a] = static_cast<std::int64_t>(i % 3) + 1;
      const Shape s = shape_of(dims);
      c.inputs.push_back(spec(fmt::format("x{}", i), d[i], s, g.data(d[i], s.numel())));
    }
    c.params.axis = axis;
    c.note = fmt::format("axis={}", axis);
    return c;
  };
  std::vector<Case> cases = {make({7}, 0),       make({2, 3, 5}, -1), make({2, 3, 5}, 0),
                             make({2, 3, 5}, 1), make({4, 17}, -2),   make({3, 2, 45}, 1),
                             make({5, 300}, -1)};
  add_strided(cases, caps, make({3, 4, 5}, 1));
  return cases;
}

Result<std::vector<Case>> attention_cases(const DTypeList& d, const KernelCaps& caps, Gen& g) {
  constexpr OpKind kOp = OpKind::kAttention;
  // Keys and values float, or quantized (a quantized KV cache) with whole blocks
  // per head.
  const bool quantized_kv = d.size() >= 4 && is_quantized(d[1]) && d[2] == d[1];
  bool float_operands = d.size() == 4 || d.size() == 5;
  for (std::size_t i = 0; float_operands && i < d.size(); ++i) {
    float_operands = is_float(d[i]) || (quantized_kv && (i == 1 || i == 2));
  }
  if (!float_operands) {
    return unsupported(kOp, d, "takes q, k, v [, mask], out (float; k and v may be quantized)");
  }
  const bool has_mask = d.size() == 5;
  struct Config {
    std::vector<std::int64_t> batch;
    std::int64_t sq, skv, h, hkv, dh;
    bool causal;
    std::int64_t query_offset;
  };
  const std::vector<Config> configs = {{{}, 1, 1, 1, 1, 1, false, 0},
                                       {{}, 1, 7, 4, 2, 16, false, 0},
                                       {{}, 5, 5, 2, 2, 8, true, 0},
                                       {{2}, 3, 9, 4, 1, 24, true, 6},
                                       // Decoding shapes: a long cache in several
                                       // tiles and splits, groups of 4 and 8 heads.
                                       {{}, 1, 300, 8, 2, 128, true, 299},
                                       {{}, 2, 130, 16, 2, 64, true, 128},
                                       // A prompt over a cache of 32-value heads.
                                       {{2}, 6, 40, 4, 2, 32, true, 34}};
  auto make = [&](const Config& cfg) {
    std::vector<std::int64_t> qd = cfg.batch, kd = cfg.batch;
    qd.insert(qd.end(), {cfg.sq, cfg.h, cfg.dh});
    kd.insert(kd.end(), {cfg.skv, cfg.hkv, cfg.dh});
    const Shape qs = shape_of(qd), ks = shape_of(kd);
    Case c;
    c.inputs = {spec("q", d[0], qs, g.uniform(qs.numel(), -1.0, 1.0)),
                spec("k", d[1], ks, g.uniform(ks.numel(), -1.0, 1.0)),
                spec("v", d[2], ks, g.uniform(ks.numel(), -1.0, 1.0))};
    if (has_mask) {
      std::vector<double> mask = g.uniform(cfg.sq * cfg.skv, -1.0, 0.0);
      for (std::size_t i = 2; i < mask.size(); i += 4) mask[i] = kNegInf;
      c.inputs.push_back(spec("mask", d[3], Shape{cfg.sq, cfg.skv}, std::move(mask)));
    }
    c.params.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.dh)));
    c.params.causal = cfg.causal;
    c.params.query_offset = cfg.query_offset;
    c.note =
        fmt::format("H={} Hkv={}{}", cfg.h, cfg.hkv,
                    cfg.causal ? fmt::format(" causal query_offset={}", cfg.query_offset) : "");
    return c;
  };
  std::vector<Case> cases;
  for (const Config& cfg : configs) {
    if (!quantized_kv || cfg.dh % block_elems(d[1]) == 0) cases.push_back(make(cfg));
  }
  if (!quantized_kv) add_strided(cases, caps, make(configs[1]));
  return cases;
}

Result<std::vector<Case>> linear_cases(const DTypeList& d, const KernelCaps& caps, Gen& g) {
  constexpr OpKind kOp = OpKind::kLinear;
  if (d.size() != 4 || !is_float(d[0]) || !is_float(d[2]) || !is_float(d[3]) ||
      !(is_float(d[1]) || is_quantized(d[1]))) {
    return unsupported(kOp, d, "takes x, w (float or quantized), bias, out (float)");
  }
  struct Config {
    std::vector<std::int64_t> x;
    std::int64_t n;
  };
  // The last float case has enough rows for the CUDA tensor-core compositions.
  std::vector<Config> configs = {{{1, 1}, 1}, {{1, 33}, 7}, {{2, 3, 40}, 9}, {{20, 48}, 12}};
  if (is_quantized(d[1])) configs = {{{1, 256}, 5}, {{3, 256}, 4}};
  auto make = [&](const Config& cfg) {
    const Shape xs = shape_of(cfg.x);
    const std::int64_t k = xs.inner();
    Case c;
    c.inputs = {spec("x", d[0], xs, g.uniform(xs.numel(), -1.0, 1.0)),
                spec("w", d[1], Shape{cfg.n, k}, g.uniform(cfg.n * k, -1.0, 1.0)),
                spec("bias", d[2], Shape{cfg.n}, g.uniform(cfg.n, -1.0, 1.0))};
    return c;
  };
  std::vector<Case> cases;
  for (const Config& cfg : configs) cases.push_back(make(cfg));
  add_strided(cases, caps, make(configs[1]));
  return cases;
}

Result<std::vector<Case>> ffn_cases(const DTypeList& d, const KernelCaps& caps, Gen& g) {
  constexpr OpKind kOp = OpKind::kFfnSwiglu;
  if (d.size() != 5 || !is_float(d[0]) || !is_float(d[4])) {
    return unsupported(kOp, d, "takes x, gate, up, down, out");
  }
  bool quantized = false;
  for (std::size_t i = 1; i <= 3; ++i) {
    if (!is_float(d[i]) && !is_quantized(d[i]))
      return unsupported(kOp, d, "weights must be float or quantized");
    quantized = quantized || is_quantized(d[i]);
  }
  struct Config {
    std::vector<std::int64_t> x;
    std::int64_t f;
  };
  // The last float case has enough rows for the CUDA tensor-core compositions.
  std::vector<Config> configs = {{{1, 16}, 24}, {{3, 33}, 20}, {{20, 32}, 24}};
  if (quantized) configs = {{{2, 256}, 256}};
  auto make = [&](const Config& cfg) {
    const Shape xs = shape_of(cfg.x);
    const std::int64_t dd = xs.inner(), f = cfg.f;
    Case c;
    c.inputs = {spec("x", d[0], xs, g.uniform(xs.numel(), -1.0, 1.0)),
                spec("gate", d[1], Shape{f, dd}, g.uniform(f * dd, -0.5, 0.5)),
                spec("up", d[2], Shape{f, dd}, g.uniform(f * dd, -0.5, 0.5)),
                spec("down", d[3], Shape{dd, f}, g.uniform(dd * f, -0.5, 0.5))};
    return c;
  };
  std::vector<Case> cases;
  for (const Config& cfg : configs) cases.push_back(make(cfg));
  add_strided(cases, caps, make(configs[0]));
  return cases;
}

}  // namespace

Result<std::vector<Case>> make_cases(OpKind op, const DTypeList& dtypes, const KernelCaps& caps,
                                     std::mt19937_64& rng) {
  if (dtypes.size() < 2 || dtypes.overflowed()) {
    return unsupported(op, dtypes, "a static op has inputs and one output");
  }
  // A quantized output is checked block by block (the harness measures each
  // value against its block's largest); only set_rows writes one so far.
  if (is_quantized(dtypes[dtypes.size() - 1]) && op != OpKind::kSetRows) {
    return unsupported(op, dtypes, "a quantized output has no elementwise check");
  }
  const OpFamily family = op_family(op);
  if (caps.requires_broadcast && family != OpFamily::kBinary && family != OpFamily::kUnary) {
    return unsupported(op, dtypes, "requires_broadcast is only defined for elementwise ops");
  }
  Gen g(rng);
  // Elementwise ops take their family's generator, so a new unary or binary op
  // of op.def needs no line here (unless its domain is narrow: unary_domain).
  if (family == OpFamily::kBinary) return binary_cases(op, dtypes, caps, g);
  if (family == OpFamily::kUnary) return unary_cases(op, dtypes, caps, g, unary_domain(op));
  // Every other op by name. One that has no line here has no cases, and
  // OpCoverageTest fails naming it.
  switch (op) {
    case OpKind::kCast: return cast_cases(dtypes, caps, g);
    case OpKind::kMatmul: return matmul_cases(dtypes, caps, g);
    case OpKind::kRmsNorm:
    case OpKind::kLayerNorm:
    case OpKind::kRmsNormMul: return norm_cases(op, dtypes, caps, g);
    case OpKind::kSoftmax: return softmax_cases(dtypes, caps, g);
    case OpKind::kRope: return rope_cases(dtypes, caps, g);
    case OpKind::kGetRows: return get_rows_cases(dtypes, caps, g);
    case OpKind::kSetRows: return set_rows_cases(dtypes, caps, g);
    case OpKind::kSum:
    case OpKind::kMean:
    case OpKind::kMax:
      return same_shape_cases(op, dtypes, caps, g, {{1}, {17}, {3, 33}, {2, 2, 64}});
    case OpKind::kCopy:
      return same_shape_cases(op, dtypes, caps, g, {{1}, {17}, {3, 33}, {2, 3, 5}});
    case OpKind::kTranspose:
      // Past the SIMD sibling's 8-column tiles and its 128- / 256-row panels, not
      // a multiple of either.
      return same_shape_cases(
          op, dtypes, caps, g,
          {{1, 1}, {3, 5}, {4, 33}, {70, 45}, {300, 21}, {2, 7, 17}, {2, 37, 19}});
    case OpKind::kConcat: return concat_cases(dtypes, caps, g);
    case OpKind::kAttention: return attention_cases(dtypes, caps, g);
    case OpKind::kLinear: return linear_cases(dtypes, caps, g);
    case OpKind::kFfnSwiglu: return ffn_cases(dtypes, caps, g);
    case OpKind::kAllReduce:
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
      // One rank (the reference's model): the kernels' copy-through; the sums over
      // several are tested with simulated ranks.
      if (!all_dense_float(dtypes) || dtypes[0] != dtypes[1]) {
        return unsupported(op, dtypes, "x and out share one float dtype");
      }
      return same_shape_cases(op, dtypes, caps, g, {{1}, {17}, {3, 33}, {2, 3, 64}});
    default: break;
  }
  return unimplemented_error(fmt::format("no case generator for op {}", name(op)));
}

}  // namespace switchyard::verify_detail
