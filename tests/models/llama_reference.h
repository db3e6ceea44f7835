// A float64 reference forward pass of a llama GGUF file, for tests only.
//
// Written from the model's definition, not from the graph builder: it reads the
// metadata keys itself, dequantizes every weight (quant.h, half.h) into doubles and
// runs plain loops: embedding lookup, per block RMS norm, q/k/v projections,
// rotary embedding on adjacent pairs, causal grouped-query attention, output
// projection, residual, RMS norm, SwiGLU feed-forward, residual; then the final
// norm and the output projection (token_embd when output.weight is absent).
// Reads "llama" and "qwen2" files: the keys' prefix is the architecture, qwen2
// rotates each head's halves against each other and adds q/k/v biases (so does
// a llama file that has them), the head size is attention.key_length where
// given, and rope angles are divided by rope_freqs.weight's factors and the
// linear scaling factor where the file has them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "switchyard/gguf.h"
#include "switchyard/half.h"
#include "switchyard/quant.h"

namespace switchyard::testing {

class LlamaReference {
 public:
  explicit LlamaReference(const GgufFile& file) : file_(file) {
    const GgufMetadata& md = file.metadata();
    const std::string arch(*md.get_string("general.architecture"));
    const auto key = [&](const char* name) { return arch + "." + name; };
    dim_ = *md.get_integer(key("embedding_length"));
    blocks_ = *md.get_integer(key("block_count"));
    ff_ = *md.get_integer(key("feed_forward_length"));
    heads_ = *md.get_integer(key("attention.head_count"));
    kv_heads_ = md.contains(key("attention.head_count_kv"))
                    ? *md.get_integer(key("attention.head_count_kv"))
                    : heads_;
    base_ = md.contains(key("rope.freq_base")) ? *md.get_float(key("rope.freq_base")) : 10000.0;
    eps_ = *md.get_float(key("attention.layer_norm_rms_epsilon"));
    hd_ = md.contains(key("attention.key_length")) ? *md.get_integer(key("attention.key_length"))
                                                   : dim_ / heads_;
    rope_dims_ = md.contains(key("rope.dimension_count"))
                     ? *md.get_integer(key("rope.dimension_count"))
                     : hd_;
    neox_ = arch == "qwen2";
    if (md.contains(key("rope.scaling.type")) &&
        *md.get_string(key("rope.scaling.type")) == "linear") {
      linear_ = *md.get_float(key("rope.scaling.factor"));
    }
    factors_.assign(static_cast<std::size_t>(rope_dims_ / 2), linear_);
    if (file.find_tensor("rope_freqs.weight") != nullptr) {
      const std::vector<double> f = load("rope_freqs.weight");
      for (std::size_t i = 0; i < factors_.size(); ++i) factors_[i] *= f[i];
    }
    embd_ = load("token_embd.weight");
    vocab_ = static_cast<std::int64_t>(embd_.size()) / dim_;
    out_norm_ = load("output_norm.weight");
    out_ = file.find_tensor("output.weight") ? load("output.weight") : embd_;
    for (std::int64_t b = 0; b < blocks_; ++b) {
      Block blk;
      const std::string p = "blk." + std::to_string(b) + ".";
      blk.attn_norm = load(p + "attn_norm.weight");
      blk.q = load(p + "attn_q.weight");
      blk.k = load(p + "attn_k.weight");
      blk.v = load(p + "attn_v.weight");
      blk.o = load(p + "attn_output.weight");
      if (file.find_tensor(p + "attn_q.bias") != nullptr) {
        blk.q_bias = load(p + "attn_q.bias");
        blk.k_bias = load(p + "attn_k.bias");
        blk.v_bias = load(p + "attn_v.bias");
      }
      blk.ffn_norm = load(p + "ffn_norm.weight");
      blk.gate = load(p + "ffn_gate.weight");
      blk.up = load(p + "ffn_up.weight");
      blk.down = load(p + "ffn_down.weight");
      blocks_w_.push_back(std::move(blk));
    }
  }

  [[nodiscard]] std::int64_t vocab() const { return vocab_; }

  // Logits [tokens, vocab] of the sequence, positions 0 .. n-1, causal.
  [[nodiscard]] std::vector<double> logits(std::span<const std::int32_t> tokens) const {
    const std::int64_t n = static_cast<std::int64_t>(tokens.size());
    const std::int64_t hd = hd_;
    const std::int64_t qd = hd * heads_;
    const std::int64_t kvd = hd * kv_heads_;
    std::vector<double> x(static_cast<std::size_t>(n * dim_));
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t i = 0; i < dim_; ++i) x[at(t, i, dim_)] = embd_[at(tokens[t], i, dim_)];
    }
    for (const Block& b : blocks_w_) {
      std::vector<double> h = rms_norm(x, b.attn_norm, n);
      std::vector<double> q = matmul(h, b.q, n, dim_, qd);
      std::vector<double> k = matmul(h, b.k, n, dim_, kvd);
      std::vector<double> v = matmul(h, b.v, n, dim_, kvd);
      add_bias(q, b.q_bias);
      add_bias(k, b.k_bias);
      add_bias(v, b.v_bias);
      rope(q, n, heads_, hd);
      rope(k, n, kv_heads_, hd);
      std::vector<double> attn(static_cast<std::size_t>(n * qd), 0.0);
      const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
      for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t head = 0; head < heads_; ++head) {
          const std::int64_t kvh = head / (heads_ / kv_heads_);
          std::vector<double> s(static_cast<std::size_t>(t + 1));
          double mx = -INFINITY;
          for (std::int64_t j = 0; j <= t; ++j) {
            double dot = 0;
            for (std::int64_t e = 0; e < hd; ++e) {
              dot += q[at(t, head * hd + e, qd)] * k[at(j, kvh * hd + e, kvd)];
            }
            s[static_cast<std::size_t>(j)] = dot * scale;
            mx = std::max(mx, s[static_cast<std::size_t>(j)]);
          }
          double sum = 0;
          for (double& e : s) sum += (e = std::exp(e - mx));
          for (std::int64_t j = 0; j <= t; ++j) {
            const double p = s[static_cast<std::size_t>(j)] / sum;
            for (std::int64_t e = 0; e < hd; ++e) {
              attn[at(t, head * hd + e, qd)] += p * v[at(j, kvh * hd + e, kvd)];
            }
          }
        }
      }
      std::vector<double> o = matmul(attn, b.o, n, qd, dim_);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      std::vector<double> h2 = rms_norm(x, b.ffn_norm, n);
      std::vector<double> g = matmul(h2, b.gate, n, dim_, ff_);
      std::vector<double> u = matmul(h2, b.up, n, dim_, ff_);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      std::vector<double> dn = matmul(g, b.down, n, ff_, dim_);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += dn[i];
    }
    std::vector<double> f = rms_norm(x, out_norm_, n);
    return matmul(f, out_, n, dim_, vocab_);
  }

 private:
  struct Block {
    std::vector<double> attn_norm, q, k, v, o, ffn_norm, gate, up, down;
    std::vector<double> q_bias, k_bias, v_bias;  // empty: none
  };

  // Each row of x plus the bias, where there is one.
  static void add_bias(std::vector<double>& x, const std::vector<double>& bias) {
    if (bias.empty()) return;
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += bias[i % bias.size()];
  }

  static std::size_t at(std::int64_t row, std::int64_t col, std::int64_t cols) {
    return static_cast<std::size_t>(row * cols + col);
  }

  std::vector<double> load(const std::string& name) const {
    const GgufTensorInfo* info = file_.find_tensor(name);
    const std::span<const std::byte> bytes = file_.tensor_bytes(*info);
    const std::int64_t n = info->shape.numel();
    std::vector<float> f(static_cast<std::size_t>(n));
    if (info->dtype == DType::kF32) {
      std::memcpy(f.data(), bytes.data(), f.size() * sizeof(float));
    } else if (info->dtype == DType::kF16 || info->dtype == DType::kBF16) {
      for (std::size_t i = 0; i < f.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        f[i] = info->dtype == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
    } else {
      Status st = dequantize(info->dtype, bytes, f);
      SWITCHYARD_CHECK(st.is_ok());
    }
    return std::vector<double>(f.begin(), f.end());
  }

  std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& w,
                               std::int64_t n) const {
    std::vector<double> y(x.size());
    for (std::int64_t t = 0; t < n; ++t) {
      double ss = 0;
      for (std::int64_t i = 0; i < dim_; ++i) ss += x[at(t, i, dim_)] * x[at(t, i, dim_)];
      const double r = 1.0 / std::sqrt(ss / static_cast<double>(dim_) + eps_);
      for (std::int64_t i = 0; i < dim_; ++i) {
        y[at(t, i, dim_)] = x[at(t, i, dim_)] * r * w[static_cast<std::size_t>(i)];
      }
    }
    return y;
  }

  // x [n, in] times w [out, in] transposed.
  static std::vector<double> matmul(const std::vector<double>& x, const std::vector<double>& w,
                                    std::int64_t n, std::int64_t in, std::int64_t out) {
    std::vector<double> y(static_cast<std::size_t>(n * out));
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t o = 0; o < out; ++o) {
        double s = 0;
        for (std::int64_t i = 0; i < in; ++i) s += x[at(t, i, in)] * w[at(o, i, in)];
        y[at(t, o, out)] = s;
      }
    }
    return y;
  }

  // Pairs of each head's first rope_dims dimensions, adjacent (2i, 2i+1) or, for
  // qwen2, halves (i, i + rope_dims/2), rotated by pos * base^(-2i/rope_dims)
  // divided by the pair's factor; the rest unchanged.
  void rope(std::vector<double>& x, std::int64_t n, std::int64_t heads, std::int64_t hd) const {
    const std::int64_t half = rope_dims_ / 2;
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t h = 0; h < heads; ++h) {
        for (std::int64_t i = 0; i < half; ++i) {
          const double theta =
              static_cast<double>(t) *
              std::pow(base_, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims_)) /
              factors_[static_cast<std::size_t>(i)];
          const std::size_t a = at(t, h * hd + (neox_ ? i : 2 * i), heads * hd);
          const std::size_t b = neox_ ? a + static_cast<std::size_t>(half) : a + 1;
          const double u = x[a], v = x[b];
          x[a] = u * std::cos(theta) - v * std::sin(theta);
          x[b] = u * std::sin(theta) + v * std::cos(theta);
        }
      }
    }
  }

  const GgufFile& file_;
  std::int64_t rope_dims_ = 0;
  std::int64_t hd_ = 0;
  bool neox_ = false;
  double linear_ = 1.0;
  std::vector<double> factors_;
  std::int64_t dim_ = 0, blocks_ = 0, ff_ = 0, heads_ = 0, kv_heads_ = 0, vocab_ = 0;
  double base_ = 10000.0, eps_ = 1e-5;
  std::vector<double> embd_, out_norm_, out_;
  std::vector<Block> blocks_w_;
};

}  // namespace switchyard::testing
