#include "verify/reference.h"

#include <cmath>
#include <limits>
#include <numbers>

#include <fmt/format.h>

namespace switchyard::verify_detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Status contract_error(OpKind op, std::string what) {
  return invalid_argument_error(fmt::format("reference {}: {}", name(op), what));
}

Status expect_arity(OpKind op, std::span<const RefTensor> in, std::size_t lo, std::size_t hi) {
  if (in.size() < lo || in.size() > hi) {
    return contract_error(op, fmt::format("takes {} to {} inputs, got {}", lo, hi, in.size()));
  }
  return Status::ok();
}

Shape with_dims(const Shape& base, int rank_keep, std::initializer_list<std::int64_t> tail) {
  std::vector<std::int64_t> dims(base.dims().begin(), base.dims().begin() + rank_keep);
  dims.insert(dims.end(), tail);
  return Shape(std::span<const std::int64_t>(dims));
}

std::int64_t batch_of(const Shape& s, int trailing) {
  std::int64_t b = 1;
  for (int d = 0; d < s.rank() - trailing; ++d) b *= s[d];
  return b;
}

bool same_leading(const Shape& a, const Shape& b, int trailing) {
  if (a.rank() != b.rank()) return false;
  for (int d = 0; d < a.rank() - trailing; ++d) {
    if (a[d] != b[d]) return false;
  }
  return true;
}

RefOutput make_output(Shape shape) {
  RefOutput out;
  out.shape = shape;
  out.values.assign(static_cast<std::size_t>(shape.numel()), 0.0);
  out.scale.assign(static_cast<std::size_t>(shape.numel()), 0.0);
  return out;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The elementwise ops take their formula from compute_reference's switch, which
// names every op: a binary or unary op added to op.def does not build until it
// has one there.
template <typename Formula>
Result<RefOutput> binary(OpKind op, std::span<const RefTensor> in, Formula formula) {
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(op, in, 2, 2));
  if (!(in[0].shape == in[1].shape)) {
    return contract_error(op, "operands must have one (broadcast) shape");
  }
  RefOutput out = make_output(in[0].shape);
  for (std::size_t i = 0; i < out.values.size(); ++i) {
    const double r = formula(in[0].values[i], in[1].values[i]);
    out.values[i] = r;
    out.scale[i] = std::abs(r);
  }
  return out;
}

template <typename Formula>
Result<RefOutput> unary(OpKind op, std::span<const RefTensor> in, Formula formula) {
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(op, in, 1, 1));
  RefOutput out = make_output(in[0].shape);
  for (std::size_t i = 0; i < out.values.size(); ++i) {
    const double r = formula(in[0].values[i]);
    out.values[i] = r;
    out.scale[i] = std::abs(r);
  }
  return out;
}

// 1 + tanh(u) and 1 + erf(v) cancel in the negative tail, even in double (a
// relative error of ~1e-7 at x = -6). The same functions written without the
// cancellation: 1 + tanh(u) = 2 sigmoid(2u), 1 + erf(v) = erfc(-v).
double gelu(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return x * sigmoid(2.0 * k * (x + 0.044715 * x * x * x));
}
double gelu_erf(double x) { return 0.5 * x * std::erfc(-x / std::numbers::sqrt2); }

Result<RefOutput> cast(std::span<const RefTensor> in, DType out_dtype) {
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(OpKind::kCast, in, 1, 1));
  if (is_quantized(out_dtype)) {
    return contract_error(OpKind::kCast, "a quantized output has no elementwise reference");
  }
  RefOutput out = make_output(in[0].shape);
  const bool to_int = !is_float(out_dtype);
  for (std::size_t i = 0; i < out.values.size(); ++i) {
    const double x = in[0].values[i];
    double r = x;
    if (out_dtype == DType::kBool) {
      r = (x != 0.0 && !std::isnan(x)) ? 1.0 : 0.0;
    } else if (to_int) {
      if (std::isnan(x)) {
        r = 0.0;
      } else {
        // Round half to even, then saturate. std::nearbyint honours the default
        // rounding mode, which is to nearest even.
        r = std::nearbyint(x);
        r = std::min(std::max(r, int_dtype_min(out_dtype)), int_dtype_max(out_dtype));
      }
    }
    out.values[i] = r;
    out.scale[i] = std::abs(r);
  }
  return out;
}

Result<RefOutput> matmul(std::span<const RefTensor> in) {
  constexpr OpKind kOp = OpKind::kMatmul;
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(kOp, in, 2, 2));
  const Shape& a = in[0].shape;
  const Shape& w = in[1].shape;
  if (a.rank() < 2 || w.rank() < 2) return contract_error(kOp, "operands need rank >= 2");
  const std::int64_t m = a[a.rank() - 2];
  const std::int64_t k = a.inner();
  const std::int64_t n = w[w.rank() - 2];
  if (w.inner() != k) return contract_error(kOp, "K of a and w differ");
  const bool shared = w.rank() == 2;
  if (!shared && !same_leading(a, w, 2)) return contract_error(kOp, "batch dims differ");
  const std::int64_t batch = batch_of(a, 2);
  RefOutput out = make_output(with_dims(a, a.rank() - 2, {m, n}));
  out.energy.assign(out.values.size(), 0.0);
  for (std::int64_t b = 0; b < batch; ++b) {
    const double* pa = in[0].values.data() + b * m * k;
    const double* pw = in[1].values.data() + (shared ? 0 : b * n * k);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        double mag = 0.0;
        double energy = 0.0;
        for (std::int64_t p = 0; p < k; ++p) {
          const double t = pa[i * k + p] * pw[j * k + p];
          acc += t;
          mag += std::abs(t);
          energy += t * t;
        }
        out.values[(b * m + i) * n + j] = acc;
        out.scale[(b * m + i) * n + j] = mag;
        out.energy[(b * m + i) * n + j] = energy;
      }
    }
  }
  return out;
}

// rms_norm (x [, w]) and rms_norm_mul (x, w).
Result<RefOutput> rms_norm(OpKind op, std::span<const RefTensor> in, const OpParams& p) {
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(op, in, op == OpKind::kRmsNormMul ? 2 : 1, 2));
  const Shape& x = in[0].shape;
  if (x.rank() < 1) return contract_error(op, "x needs rank >= 1");
  const std::int64_t d = x.inner();
  if (in.size() == 2 && !(in[1].shape == Shape{d})) return contract_error(op, "w must be [D]");
  RefOutput out = make_output(x);
  const std::int64_t rows = d > 0 ? x.numel() / d : 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* row = in[0].values.data() + r * d;
    double ss = 0.0;
    for (std::int64_t i = 0; i < d; ++i) ss += row[i] * row[i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + static_cast<double>(p.eps));
    for (std::int64_t i = 0; i < d; ++i) {
      const double w = in.size() == 2 ? in[1].values[i] : 1.0;
      const double v = row[i] * inv * w;
      out.values[r * d + i] = v;
      out.scale[r * d + i] = std::abs(v);
    }
  }
  return out;
}

Result<RefOutput> layer_norm(std::span<const RefTensor> in, const OpParams& p) {
  constexpr OpKind kOp = OpKind::kLayerNorm;
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(kOp, in, 1, 3));
  const Shape& x = in[0].shape;
  if (x.rank() < 1) return contract_error(kOp, "x needs rank >= 1");
  const std::int64_t d = x.inner();
  for (std::size_t i = 1; i < in.size(); ++i) {
    if (!(in[i].shape == Shape{d})) return contract_error(kOp, "w and b must be [D]");
  }
  RefOutput out = make_output(x);
  const std::int64_t rows = d > 0 ? x.numel() / d : 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* row = in[0].values.data() + r * d;
    double mean = 0.0;
    for (std::int64_t i = 0; i < d; ++i) mean += row[i];
    mean /= static_cast<double>(d);
    double var = 0.0;
    for (std::int64_t i = 0; i < d; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(var + static_cast<double>(p.eps));
    for (std::int64_t i = 0; i < d; ++i) {
      const double w = in.size() >= 2 ? in[1].values[i] : 1.0;
      const double b = in.size() == 3 ? in[2].values[i] : 0.0;
      out.values[r * d + i] = (row[i] - mean) * inv * w + b;
      // x - mean cancels: the error scales with the operands, not the difference.
      out.scale[r * d + i] = (std::abs(row[i]) + std::abs(mean)) * inv * std::abs(w) + std::abs(b);
    }
  }
  return out;
}

// max(a, b) that returns NaN when either is NaN (std::max keeps `a` then).
double max_nan(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
}

// Softmax of one row of logits in place; a row with every entry -inf becomes zeros,
// and a row holding a NaN becomes NaN but for its masked (-inf) entries.
void softmax_row(std::vector<double>& row) {
  double mx = -kInf;
  for (double v : row) mx = max_nan(mx, v);
  if (std::isnan(mx)) {
    for (double& v : row) v = v == -kInf ? 0.0 : kNaN;
    return;
  }
  if (mx == -kInf) {
    std::fill(row.begin(), row.end(), 0.0);
    return;
  }
  double sum = 0.0;
  for (double& v : row) {
    v = v == -kInf ? 0.0 : std::exp(v - mx);
    sum += v;
  }
  for (double& v : row) v /= sum;
}

bool causal_masked(std::int64_t row, std::int64_t col, const OpParams& p) {
  return p.causal && col > row + p.query_offset;
}

Result<RefOutput> softmax(std::span<const RefTensor> in, const OpParams& p) {
  constexpr OpKind kOp = OpKind::kSoftmax;
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(kOp, in, 1, 2));
  const Shape& x = in[0].shape;
  if (x.rank() < 1) return contract_error(kOp, "x needs rank >= 1");
  const std::int64_t c = x.inner();
  const std::int64_t r = x.rank() >= 2 ? x[x.rank() - 2] : 1;
  if (in.size() == 2 && !(in[1].shape == Shape{r, c})) {
    return contract_error(kOp, "mask must be [R, C]");
  }
  RefOutput out = make_output(x);
  const std::int64_t rows = c > 0 ? x.numel() / c : 0;
  std::vector<double> row(static_cast<std::size_t>(c));
  for (std::int64_t q = 0; q < rows; ++q) {
    const std::int64_t i = q % r;
    for (std::int64_t j = 0; j < c; ++j) {
      double v = in[0].values[q * c + j] * static_cast<double>(p.scale);
      if (in.size() == 2) v += in[1].values[i * c + j];
      if (causal_masked(i, j, p)) v = -kInf;
      row[j] = v;
    }
    softmax_row(row);
    for (std::int64_t j = 0; j < c; ++j) {
      out.values[q * c + j] = row[j];
      out.scale[q * c + j] = std::abs(row[j]);
    }
  }
  return out;
}

Result<RefOutput> rope(std::span<const RefTensor> in, const OpParams& p) {
  constexpr OpKind kOp = OpKind::kRope;
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(kOp, in, 2, 3));
  const Shape& x = in[0].shape;
  if (x.rank() < 3) return contract_error(kOp, "x must be [..., T, H, D]");
  const std::int64_t d = x.inner();
  const std::int64_t h = x[x.rank() - 2];
  const std::int64_t t = x[x.rank() - 3];
  if (!(in[1].shape == Shape{t})) return contract_error(kOp, "pos must be [T]");
  const std::int64_t rd = p.rope_dims == 0 ? d : p.rope_dims;
  if (rd < 0 || rd > d || rd % 2 != 0) {
    return contract_error(kOp, "rope_dims must be even and at most D");
  }
  RefOutput out = make_output(x);
  const std::int64_t count = d > 0 ? x.numel() / d : 0;  // (batch, t, h) rows
  const std::int64_t half = rd / 2;
  if (in.size() == 3 && !(in[2].shape == Shape{half})) {
    return contract_error(kOp, "frequency factors must be [rope_dims / 2]");
  }
  for (std::int64_t row = 0; row < count; ++row) {
    const std::int64_t ti = (row / h) % t;
    const double pos = in[1].values[ti];
    const double* src = in[0].values.data() + row * d;
    double* dst = out.values.data() + row * d;
    double* sc = out.scale.data() + row * d;
    for (std::int64_t i = rd; i < d; ++i) {
      dst[i] = src[i];
      sc[i] = std::abs(src[i]);
    }
    for (std::int64_t i = 0; i < half; ++i) {
      const double factor = in.size() == 3 ? in[2].values[i] : 1.0;
      const double theta = pos *
                           std::pow(static_cast<double>(p.rope_base),
                                    -2.0 * static_cast<double>(i) / static_cast<double>(rd)) /
                           factor;
      const std::int64_t iu = p.rope_mode == RopeMode::kNormal ? 2 * i : i;
      const std::int64_t iv = p.rope_mode == RopeMode::kNormal ? 2 * i + 1 : i + half;
      const double u = src[iu];
      const double v = src[iv];
      const double c = std::cos(theta);
      const double s = std::sin(theta);
      dst[iu] = u * c - v * s;
      dst[iv] = u * s + v * c;
      sc[iu] = std::abs(u * c) + std::abs(v * s);
      sc[iv] = std::abs(u * s) + std::abs(v * c);
    }
  }
  return out;
}

// dst with row idx[i] replaced by src[i]; each element's scale is its own magnitude.
Result<RefOutput> set_rows(std::span<const RefTensor> in) {
  constexpr OpKind kOp = OpKind::kSetRows;
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(kOp, in, 3, 3));
  const Shape& dst = in[0].shape;
  const Shape& src = in[1].shape;
  if (dst.rank() != 2 || src.rank() != 2 || src[1] != dst[1] || in[2].shape.rank() != 1 ||
      in[2].shape[0] != src[0]) {
    return contract_error(kOp, "dst must be [R, C], src [N, C] and idx [N]");
  }
  const std::int64_t rows = dst[0];
  const std::int64_t cols = dst[1];
  RefOutput out = make_output(dst);
  for (std::int64_t e = 0; e < rows * cols; ++e) {
    out.values[e] = in[0].values[e];
    out.scale[e] = std::abs(in[0].values[e]);
  }
  for (std::int64_t i = 0; i < src[0]; ++i) {
    const double idx = in[2].values[i];
    if (!(idx >= 0.0 && idx < static_cast<double>(rows))) {
      return out_of_range_error(
          fmt::format("reference set_rows: index {} outside [0, {})", idx, rows));
    }
    const auto r = static_cast<std::int64_t>(idx);
    for (std::int64_t j = 0; j < cols; ++j) {
      out.values[r * cols + j] = in[1].values[i * cols + j];
      out.scale[r * cols + j] = std::abs(in[1].values[i * cols + j]);
    }
  }
  return out;
}

Result<RefOutput> get_rows(std::span<const RefTensor> in) {
  constexpr OpKind kOp = OpKind::kGetRows;
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(kOp, in, 2, 2));
  const Shape& table = in[0].shape;
  if (table.rank() != 2 || in[1].shape.rank() != 1) {
    return contract_error(kOp, "table must be [R, C] and idx [N]");
  }
  const std::int64_t rows = table[0];
  const std::int64_t cols = table[1];
  const std::int64_t n = in[1].shape[0];
  RefOutput out = make_output(Shape{n, cols});
  for (std::int64_t i = 0; i < n; ++i) {
    const double idx = in[1].values[i];
    if (!(idx >= 0.0 && idx < static_cast<double>(rows))) {
      return out_of_range_error(
          fmt::format("reference get_rows: index {} outside [0, {})", idx, rows));
    }
    const auto r = static_cast<std::int64_t>(idx);
    for (std::int64_t j = 0; j < cols; ++j) {
      out.values[i * cols + j] = in[0].values[r * cols + j];
      out.scale[i * cols + j] = std::abs(in[0].values[r * cols + j]);
    }
  }
  return out;
}

enum class Reduction : std::uint8_t { kSum, kMean, kMax };

Result<RefOutput> reduce(OpKind op, Reduction how, std::span<const RefTensor> in) {
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(op, in, 1, 1));
  const Shape& x = in[0].shape;
  if (x.rank() < 1 || x.inner() < 1) return contract_error(op, "x must be [..., D] with D >= 1");
  const std::int64_t d = x.inner();
  const bool max = how == Reduction::kMax;
  RefOutput out = make_output(with_dims(x, x.rank() - 1, {1}));
  for (std::int64_t r = 0; r < x.numel() / d; ++r) {
    const double* row = in[0].values.data() + r * d;
    double acc = max ? -kInf : 0.0;
    double mag = 0.0;
    for (std::int64_t i = 0; i < d; ++i) {
      acc = max ? max_nan(acc, row[i]) : acc + row[i];
      mag += std::abs(row[i]);
    }
    if (how == Reduction::kMean) {
      acc /= static_cast<double>(d);
      mag /= static_cast<double>(d);
    }
    out.values[r] = acc;
    out.scale[r] = max ? std::abs(acc) : mag;
  }
  return out;
}

Result<RefOutput> transpose(std::span<const RefTensor> in) {
  constexpr OpKind kOp = OpKind::kTranspose;
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(kOp, in, 1, 1));
  const Shape& x = in[0].shape;
  if (x.rank() < 2) return contract_error(kOp, "x needs rank >= 2");
  const std::int64_t a = x[x.rank() - 2];
  const std::int64_t b = x.inner();
  RefOutput out = make_output(with_dims(x, x.rank() - 2, {b, a}));
  for (std::int64_t m = 0; m < batch_of(x, 2); ++m) {
    for (std::int64_t i = 0; i < a; ++i) {
      for (std::int64_t j = 0; j < b; ++j) {
        const double v = in[0].values[(m * a + i) * b + j];
        out.values[(m * b + j) * a + i] = v;
        out.scale[(m * b + j) * a + i] = std::abs(v);
      }
    }
  }
  return out;
}

Result<RefOutput> concat(std::span<const RefTensor> in, const OpParams& p) {
  constexpr OpKind kOp = OpKind::kConcat;
  if (in.empty()) return contract_error(kOp, "needs at least one input");
  const int rank = in[0].shape.rank();
  const int axis = p.axis < 0 ? p.axis + rank : p.axis;
  if (axis < 0 || axis >= rank) return contract_error(kOp, "axis out of range");
  std::int64_t total = 0;
  for (const RefTensor& t : in) {
    if (t.shape.rank() != rank) return contract_error(kOp, "inputs differ in rank");
    for (int d = 0; d < rank; ++d) {
      if (d != axis && t.shape[d] != in[0].shape[d]) {
        return contract_error(kOp, "inputs differ outside the axis");
      }
    }
    total += t.shape[axis];
  }
  std::vector<std::int64_t> dims(in[0].shape.dims().begin(), in[0].shape.dims().end());
  dims[axis] = total;
  RefOutput out = make_output(Shape(std::span<const std::int64_t>(dims)));
  // outer: product of dims before axis; inner: product after it.
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= dims[d];
  for (int d = axis + 1; d < rank; ++d) inner *= dims[d];
  for (std::int64_t o = 0; o < outer; ++o) {
    std::int64_t at = 0;
    for (const RefTensor& t : in) {
      const std::int64_t len = t.shape[axis];
      for (std::int64_t a = 0; a < len; ++a) {
        for (std::int64_t i = 0; i < inner; ++i) {
          const double v = t.values[(o * len + a) * inner + i];
          out.values[(o * total + at + a) * inner + i] = v;
          out.scale[(o * total + at + a) * inner + i] = std::abs(v);
        }
      }
      at += len;
    }
  }
  return out;
}

Result<RefOutput> attention(std::span<const RefTensor> in, const OpParams& p) {
  constexpr OpKind kOp = OpKind::kAttention;
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(kOp, in, 3, 4));
  const Shape& q = in[0].shape;
  const Shape& k = in[1].shape;
  if (q.rank() < 3 || !same_leading(q, k, 3) || !(k == in[2].shape)) {
    return contract_error(kOp, "q, k, v must be [..., S, H, Dh] with one batch and k == v");
  }
  const std::int64_t sq = q[q.rank() - 3], nh = q[q.rank() - 2], dh = q.inner();
  const std::int64_t skv = k[k.rank() - 3], nkv = k[k.rank() - 2];
  if (k.inner() != dh || nkv == 0 || nh % nkv != 0) {
    return contract_error(kOp, "head dims differ or H is not a multiple of Hkv");
  }
  if (in.size() == 4 && !(in[3].shape == Shape{sq, skv})) {
    return contract_error(kOp, "mask must be [Sq, Skv]");
  }
  const std::int64_t group = nh / nkv;
  RefOutput out = make_output(q);
  std::vector<double> logits(static_cast<std::size_t>(skv));
  for (std::int64_t b = 0; b < batch_of(q, 3); ++b) {
    for (std::int64_t i = 0; i < sq; ++i) {
      for (std::int64_t h = 0; h < nh; ++h) {
        const std::int64_t hk = h / group;
        const double* qv = in[0].values.data() + ((b * sq + i) * nh + h) * dh;
        for (std::int64_t j = 0; j < skv; ++j) {
          const double* kv = in[1].values.data() + ((b * skv + j) * nkv + hk) * dh;
          double dot = 0.0;
          for (std::int64_t e = 0; e < dh; ++e) dot += qv[e] * kv[e];
          double l = dot * static_cast<double>(p.scale);
          if (in.size() == 4) l += in[3].values[i * skv + j];
          if (causal_masked(i, j, p)) l = -kInf;
          logits[j] = l;
        }
        softmax_row(logits);
        double* o = out.values.data() + ((b * sq + i) * nh + h) * dh;
        double* sc = out.scale.data() + ((b * sq + i) * nh + h) * dh;
        for (std::int64_t j = 0; j < skv; ++j) {
          const double* vv = in[2].values.data() + ((b * skv + j) * nkv + hk) * dh;
          for (std::int64_t e = 0; e < dh; ++e) {
            o[e] += logits[j] * vv[e];
            sc[e] += logits[j] * std::abs(vv[e]);
          }
        }
      }
    }
  }
  return out;
}

Result<RefOutput> linear(std::span<const RefTensor> in) {
  constexpr OpKind kOp = OpKind::kLinear;
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(kOp, in, 3, 3));
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  if (x.rank() < 1 || w.rank() != 2 || w.inner() != x.inner() || !(in[2].shape == Shape{w[0]})) {
    return contract_error(kOp, "x [..., K], w [N, K], bias [N] expected");
  }
  const std::int64_t k = x.inner(), n = w[0];
  const std::int64_t rows = batch_of(x, 1);
  RefOutput out = make_output(with_dims(x, x.rank() - 1, {n}));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = in[2].values[j];
      double mag = std::abs(acc);
      for (std::int64_t p = 0; p < k; ++p) {
        const double t = in[0].values[r * k + p] * in[1].values[j * k + p];
        acc += t;
        mag += std::abs(t);
      }
      out.values[r * n + j] = acc;
      out.scale[r * n + j] = mag;
    }
  }
  return out;
}

Result<RefOutput> ffn_swiglu(std::span<const RefTensor> in) {
  constexpr OpKind kOp = OpKind::kFfnSwiglu;
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(kOp, in, 4, 4));
  const Shape& x = in[0].shape;
  if (x.rank() < 1) return contract_error(kOp, "x needs rank >= 1");
  const std::int64_t d = x.inner();
  const std::int64_t f = in[1].shape.rank() == 2 ? in[1].shape[0] : -1;
  if (!(in[1].shape == Shape{f, d}) || !(in[2].shape == Shape{f, d}) ||
      !(in[3].shape == Shape{d, f})) {
    return contract_error(kOp, "gate, up [F, D] and down [D, F] expected");
  }
  RefOutput out = make_output(x);
  std::vector<double> hidden(static_cast<std::size_t>(f)), hidden_mag(static_cast<std::size_t>(f));
  for (std::int64_t r = 0; r < batch_of(x, 1); ++r) {
    const double* xv = in[0].values.data() + r * d;
    for (std::int64_t i = 0; i < f; ++i) {
      double g = 0.0, u = 0.0, gm = 0.0, um = 0.0;
      for (std::int64_t e = 0; e < d; ++e) {
        g += xv[e] * in[1].values[i * d + e];
        u += xv[e] * in[2].values[i * d + e];
        gm += std::abs(xv[e] * in[1].values[i * d + e]);
        um += std::abs(xv[e] * in[2].values[i * d + e]);
      }
      const double s = g * sigmoid(g);
      hidden[i] = s * u;
      // silu's slope stays below 1.1, so an error of gm in g moves s by < 1.1 gm.
      hidden_mag[i] = std::abs(s) * um + 1.1 * gm * std::abs(u) + std::abs(hidden[i]);
    }
    for (std::int64_t e = 0; e < d; ++e) {
      double acc = 0.0, mag = 0.0;
      for (std::int64_t i = 0; i < f; ++i) {
        acc += hidden[i] * in[3].values[e * f + i];
        mag += hidden_mag[i] * std::abs(in[3].values[e * f + i]);
      }
      out.values[r * d + e] = acc;
      out.scale[r * d + e] = mag;
    }
  }
  return out;
}

Result<RefOutput> copy(std::span<const RefTensor> in) {
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(OpKind::kCopy, in, 1, 1));
  RefOutput out = make_output(in[0].shape);
  out.values = in[0].values;
  for (std::size_t i = 0; i < out.values.size(); ++i) out.scale[i] = std::abs(out.values[i]);
  return out;
}

// The harness runs a kernel as a group of one rank, where every collective is a
// copy; the sums over several ranks are tested with simulated ranks
// (tests/backends/cpu_collective_test.cpp).
Result<RefOutput> collective(OpKind op, std::span<const RefTensor> in, const OpParams& params) {
  if (params.ranks != 1) {
    return invalid_argument_error(fmt::format(
        "reference: {} is modelled for one rank, the case has {}", name(op), params.ranks));
  }
  SWITCHYARD_RETURN_IF_ERROR(expect_arity(op, in, 1, 1));
  RefOutput out = make_output(in[0].shape);
  out.values = in[0].values;
  for (std::size_t i = 0; i < out.values.size(); ++i) out.scale[i] = std::abs(out.values[i]);
  return out;
}

}  // namespace

double int_dtype_min(DType t) {
  switch (t) {
    case DType::kI64: return static_cast<double>(std::numeric_limits<std::int64_t>::min());
    case DType::kI32: return static_cast<double>(std::numeric_limits<std::int32_t>::min());
    case DType::kI16: return static_cast<double>(std::numeric_limits<std::int16_t>::min());
    case DType::kI8: return static_cast<double>(std::numeric_limits<std::int8_t>::min());
    default: return 0.0;  // u8, bool
  }
}

double int_dtype_max(DType t) {
  switch (t) {
    case DType::kI64: return static_cast<double>(std::numeric_limits<std::int64_t>::max());
    case DType::kI32: return static_cast<double>(std::numeric_limits<std::int32_t>::max());
    case DType::kI16: return static_cast<double>(std::numeric_limits<std::int16_t>::max());
    case DType::kI8: return static_cast<double>(std::numeric_limits<std::int8_t>::max());
    case DType::kU8: return 255.0;
    default: return 1.0;  // bool
  }
}

Result<RefOutput> compute_reference(OpKind op, std::span<const RefTensor> inputs,
                                    const OpParams& params, DType out_dtype) {
  for (const RefTensor& t : inputs) {
    if (static_cast<std::int64_t>(t.values.size()) != t.shape.numel()) {
      return invalid_argument_error("reference: an operand's values do not match its shape");
    }
  }
  // Exhaustive, no default: an op added to op.def does not build until it has a
  // reference here (-Wswitch, warnings are errors).
  using X = double;
  switch (op) {
    case OpKind::kAdd: return binary(op, inputs, [](X a, X b) { return a + b; });
    case OpKind::kSub: return binary(op, inputs, [](X a, X b) { return a - b; });
    case OpKind::kMul: return binary(op, inputs, [](X a, X b) { return a * b; });
    case OpKind::kDiv: return binary(op, inputs, [](X a, X b) { return a / b; });
    case OpKind::kNeg: return unary(op, inputs, [](X x) { return -x; });
    case OpKind::kExp: return unary(op, inputs, [](X x) { return std::exp(x); });
    case OpKind::kSilu: return unary(op, inputs, [](X x) { return x * sigmoid(x); });
    case OpKind::kGelu: return unary(op, inputs, &gelu);
    case OpKind::kGeluErf: return unary(op, inputs, &gelu_erf);
    case OpKind::kGeluQuick: return unary(op, inputs, [](X x) { return x * sigmoid(1.702 * x); });
    case OpKind::kRelu:
      return unary(op, inputs, [](X x) { return x > 0.0 || std::isnan(x) ? x : 0.0; });
    case OpKind::kSqrt: return unary(op, inputs, [](X x) { return std::sqrt(x); });
    case OpKind::kRsqrt: return unary(op, inputs, [](X x) { return 1.0 / std::sqrt(x); });
    case OpKind::kSigmoid: return unary(op, inputs, &sigmoid);
    case OpKind::kTanh: return unary(op, inputs, [](X x) { return std::tanh(x); });
    case OpKind::kScale: {
      const double scale = params.scale;
      return unary(op, inputs, [scale](X x) { return x * scale; });
    }
    case OpKind::kCast: return cast(inputs, out_dtype);
    case OpKind::kMatmul: return matmul(inputs);
    case OpKind::kRmsNorm:
    case OpKind::kRmsNormMul: return rms_norm(op, inputs, params);
    case OpKind::kLayerNorm: return layer_norm(inputs, params);
    case OpKind::kSoftmax: return softmax(inputs, params);
    case OpKind::kRope: return rope(inputs, params);
    case OpKind::kGetRows: return get_rows(inputs);
    case OpKind::kSetRows: return set_rows(inputs);
    case OpKind::kSum: return reduce(op, Reduction::kSum, inputs);
    case OpKind::kMean: return reduce(op, Reduction::kMean, inputs);
    case OpKind::kMax: return reduce(op, Reduction::kMax, inputs);
    case OpKind::kCopy: return copy(inputs);
    case OpKind::kTranspose: return transpose(inputs);
    case OpKind::kConcat: return concat(inputs, params);
    case OpKind::kAttention: return attention(inputs, params);
    case OpKind::kLinear: return linear(inputs);
    case OpKind::kFfnSwiglu: return ffn_swiglu(inputs);
    case OpKind::kAllReduce:
    case OpKind::kAllGather:
    case OpKind::kReduceScatter: return collective(op, inputs, params);
  }
  // Only a value outside OpKind's enumerators gets here.
  return invalid_argument_error(
      fmt::format("reference: op #{} is not an op of op.def", static_cast<int>(op)));
}

}  // namespace switchyard::verify_detail
