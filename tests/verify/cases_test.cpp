// The case generators: every op of docs/ops.md has one, its cases fit the op's
// reference, and strided or broadcast inputs appear exactly when the caps allow.
#include "verify/cases.h"

#include <cmath>

#include <gtest/gtest.h>

#include "switchyard/quant.h"
#include "verify/quantized_operands.h"
#include "verify/reference.h"
#include "verify/storage.h"

namespace switchyard::verify_detail {
namespace {

constexpr DType kF32 = DType::kF32;
constexpr DType kF16 = DType::kF16;
constexpr DType kBF16 = DType::kBF16;
constexpr DType kI32 = DType::kI32;

struct KeyCase {
  OpKind op;
  DTypeList dtypes;
};

// At least one dense key for every op, in the arities the contract allows.
std::vector<KeyCase> dense_keys() {
  return {
      {OpKind::kAdd, {kF32, kF32, kF32}},
      {OpKind::kSub, {kF16, kF16, kF16}},
      {OpKind::kMul, {kBF16, kBF16, kBF16}},
      {OpKind::kDiv, {kF32, kF32, kF32}},
      {OpKind::kNeg, {kF32, kF32}},
      {OpKind::kExp, {kF16, kF16}},
      {OpKind::kSilu, {kF32, kF32}},
      {OpKind::kGelu, {kF32, kF32}},
      {OpKind::kGeluErf, {kBF16, kBF16}},
      {OpKind::kGeluQuick, {kF16, kF16}},
      {OpKind::kRelu, {kF32, kF32}},
      {OpKind::kSqrt, {kF32, kF32}},
      {OpKind::kRsqrt, {kF32, kF32}},
      {OpKind::kSigmoid, {kF32, kF32}},
      {OpKind::kTanh, {kF32, kF32}},
      {OpKind::kScale, {kF32, kF32}},
      {OpKind::kCast, {kF32, kF16}},
      {OpKind::kCast, {kF32, DType::kI8}},
      {OpKind::kCast, {kI32, kF16}},
      {OpKind::kCast, {DType::kI16, DType::kI8}},
      {OpKind::kMatmul, {kF32, kF32, kF32}},
      {OpKind::kMatmul, {kF32, kF16, kF32}},
      {OpKind::kMatmul, {kBF16, kBF16, kBF16}},
      {OpKind::kRmsNorm, {kF32, kF32}},
      {OpKind::kRmsNorm, {kF32, kF32, kF32}},
      {OpKind::kLayerNorm, {kF32, kF32}},
      {OpKind::kLayerNorm, {kF32, kF32, kF32, kF32}},
      {OpKind::kSoftmax, {kF32, kF32}},
      {OpKind::kSoftmax, {kF32, kF16, kF32}},
      {OpKind::kRope, {kF32, kI32, kF32}},
      {OpKind::kGetRows, {kF16, kI32, kF32}},
      {OpKind::kGetRows, {DType::kI8, kI32, kF32}},
      {OpKind::kSetRows, {kF16, kF32, kI32, kF16}},
      {OpKind::kSetRows, {kF32, kF32, kI32, kF32}},
      {OpKind::kSum, {kF32, kF32}},
      {OpKind::kMean, {kF32, kF32}},
      {OpKind::kMax, {kF16, kF16}},
      {OpKind::kCopy, {kF32, kF32}},
      {OpKind::kCopy, {kI32, kI32}},
      {OpKind::kTranspose, {kF32, kF32}},
      {OpKind::kConcat, {kF32, kF32}},
      {OpKind::kConcat, {kF32, kF32, kF32, kF32}},
      {OpKind::kAttention, {kF32, kF32, kF32, kF32}},
      {OpKind::kAttention, {kF32, kF32, kF32, kF32, kF32}},
      {OpKind::kLinear, {kF32, kF32, kF32, kF32}},
      {OpKind::kFfnSwiglu, {kF32, kF32, kF32, kF32, kF32}},
      {OpKind::kRmsNormMul, {kF32, kF32, kF32}},
      {OpKind::kAllReduce, {kF32, kF32}},
      {OpKind::kAllGather, {kF16, kF16}},
      {OpKind::kReduceScatter, {DType::kBF16, DType::kBF16}},
  };
}

TEST(VerifyCasesTest, EveryOpHasAGenerator) {
  for (OpKind op : kAllOps) {
    bool found = false;
    for (const KeyCase& k : dense_keys()) found = found || k.op == op;
    EXPECT_TRUE(found) << name(op) << " has no key in this test";
  }
}

TEST(VerifyCasesTest, CasesFitTheReferenceAtEveryKey) {
  const KernelCaps all{.strided_input = true, .broadcast_input = true};
  for (const KeyCase& k : dense_keys()) {
    std::mt19937_64 rng(7);
    Result<std::vector<Case>> cases = make_cases(k.op, k.dtypes, all, rng);
    ASSERT_TRUE(cases.is_ok()) << name(k.op) << ": " << cases.status().to_string();
    EXPECT_GE(cases->size(), 2u) << name(k.op);
    bool odd = false, strided = false;
    for (Case& c : *cases) {
      ASSERT_EQ(c.inputs.size() + 1, k.dtypes.size()) << name(k.op);
      std::vector<RefTensor> refs;
      for (std::size_t i = 0; i < c.inputs.size(); ++i) {
        InputSpec& in = c.inputs[i];
        EXPECT_EQ(in.dtype, k.dtypes[i]);
        ASSERT_EQ(static_cast<std::int64_t>(in.values.size()), in.shape.numel());
        round_to_dtype(in.dtype, in.values);
        collapse_broadcast(in.shape, in.broadcast_mask, in.values);
        refs.push_back({in.dtype, in.shape, in.values});
        // A dimension that no SIMD width divides.
        for (std::int64_t d : in.shape.dims()) odd = odd || (d > 1 && d % 2 == 1);
        strided = strided || in.strided;
      }
      Result<RefOutput> out =
          compute_reference(k.op, refs, c.params, k.dtypes[k.dtypes.size() - 1]);
      ASSERT_TRUE(out.is_ok()) << name(k.op) << ": " << out.status().to_string();
      EXPECT_GT(out->shape.numel(), 0);
    }
    EXPECT_TRUE(odd) << name(k.op) << " never gets an odd size";
    EXPECT_TRUE(strided) << name(k.op) << " never gets a strided input";
  }
}

TEST(VerifyCasesTest, LayoutsFollowTheCaps) {
  std::mt19937_64 rng(1);
  const DTypeList key{kF32, kF32, kF32};
  auto count = [&](const KernelCaps& caps, bool want_strided) {
    int n = 0;
    const std::vector<Case> cases = *make_cases(OpKind::kAdd, key, caps, rng);
    for (const Case& c : cases) {
      for (const InputSpec& in : c.inputs) {
        if (want_strided ? in.strided : in.broadcast_mask != 0) {
          ++n;
          break;
        }
      }
    }
    return n;
  };
  EXPECT_EQ(count({}, true), 0);
  EXPECT_EQ(count({}, false), 0);
  EXPECT_GT(count({.strided_input = true}, true), 0);
  EXPECT_EQ(count({.strided_input = true}, false), 0);
  EXPECT_GT(count({.broadcast_input = true}, false), 0);
  // An entry that requires a broadcast operand gets nothing else.
  const std::vector<Case> only_broadcast =
      *make_cases(OpKind::kAdd, key, {.requires_broadcast = true}, rng);
  for (const Case& c : only_broadcast) {
    EXPECT_TRUE(c.inputs[0].broadcast_mask != 0 || c.inputs[1].broadcast_mask != 0);
  }
}

TEST(VerifyCasesTest, CoversSizeOneAndTheParamVariants) {
  std::mt19937_64 rng(3);
  bool causal_full_row = false, masked = false;
  const std::vector<Case> softmax = *make_cases(OpKind::kSoftmax, {kF32, kF32, kF32}, {}, rng);
  for (const Case& c : softmax) {
    causal_full_row = causal_full_row || (c.params.causal && c.params.query_offset < 0);
    masked = masked || c.inputs.size() == 2;
  }
  EXPECT_TRUE(causal_full_row);
  EXPECT_TRUE(masked);
  bool gqa = false;
  const std::vector<Case> attention =
      *make_cases(OpKind::kAttention, {kF32, kF32, kF32, kF32}, {}, rng);
  for (const Case& c : attention) {
    const Shape& q = c.inputs[0].shape;
    const Shape& k = c.inputs[1].shape;
    gqa = gqa || q[q.rank() - 2] != k[k.rank() - 2];
  }
  EXPECT_TRUE(gqa);
  bool normal = false, neox = false, partial = false;
  const std::vector<Case> rope = *make_cases(OpKind::kRope, {kF32, kI32, kF32}, {}, rng);
  for (const Case& c : rope) {
    normal = normal || c.params.rope_mode == RopeMode::kNormal;
    neox = neox || c.params.rope_mode == RopeMode::kNeox;
    partial = partial || c.params.rope_dims != 0;
  }
  EXPECT_TRUE(normal && neox && partial);
  bool size_one = false;
  const std::vector<Case> matmul = *make_cases(OpKind::kMatmul, {kF32, kF32, kF32}, {}, rng);
  for (const Case& c : matmul) {
    size_one = size_one || c.inputs[0].shape.numel() == 1;
  }
  EXPECT_TRUE(size_one);
}

TEST(VerifyCasesTest, RefusesKeysOutsideTheContract) {
  std::mt19937_64 rng(1);
  const std::vector<KeyCase> bad = {
      {OpKind::kAdd, {kF32, kF32}},                   // wrong arity
      {OpKind::kAdd, {kF32, kF16, kF32}},             // mixed dtypes
      {OpKind::kRope, {kF32, kF32, kF32}},            // float positions
      {OpKind::kMatmul, {DType::kQ4_0, kF32, kF32}},  // quantized activations
      {OpKind::kCast, {kF32, DType::kQ8_0}},          // quantized output
      {OpKind::kLayerNorm, {kF32, kF32, kF32, kF32, kF32}},
  };
  for (const KeyCase& k : bad) {
    Result<std::vector<Case>> r = make_cases(k.op, k.dtypes, {}, rng);
    ASSERT_FALSE(r.is_ok()) << name(k.op) << " " << k.dtypes.to_string();
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  }
  // requires_broadcast means nothing to a matmul.
  EXPECT_FALSE(
      make_cases(OpKind::kMatmul, {kF32, kF32, kF32}, {.requires_broadcast = true}, rng).is_ok());
}

TEST(VerifyStorageTest, UlpAndRounding) {
  EXPECT_EQ(ulp_of(kF32, 1.0), 0x1p-23);
  EXPECT_EQ(ulp_of(kF32, 1.5), 0x1p-23);
  EXPECT_EQ(ulp_of(kF32, 0.75), 0x1p-24);
  EXPECT_EQ(ulp_of(kF16, 1.0), 0x1p-10);
  EXPECT_EQ(ulp_of(kF16, 0.0), 0x1p-24);  // subnormal step
  EXPECT_EQ(ulp_of(kF16, 1e-7), 0x1p-24);
  EXPECT_EQ(ulp_of(kBF16, -3.0), 0x1p-6);
  EXPECT_EQ(ulp_of(kI32, 1e6), 1.0);
  std::vector<double> v = {0.1, 1.0 / 3.0, 2.5, 300};
  round_to_dtype(DType::kI8, v);
  EXPECT_EQ(v, (std::vector<double>{0, 0, 2, 127}));
  std::vector<double> h = {0.1};
  round_to_dtype(kF16, h);
  EXPECT_EQ(h[0], 0.0999755859375);  // the f16 nearest 0.1
}

TEST(VerifyStorageTest, StridedAndBroadcastViewsReadTheLogicalValues) {
  const Shape s{2, 3};
  const std::vector<double> values = {1, 2, 3, 4, 5, 6};
  Result<HostInput> strided = make_input(kF32, s, values, Layout::kStrided, 0);
  ASSERT_TRUE(strided.is_ok());
  EXPECT_FALSE(strided->view.is_contiguous());
  for (std::int64_t i = 0; i < 2; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) {
      const std::int64_t at =
          strided->view.offset() + i * strided->view.stride(0) + j * strided->view.stride(1);
      EXPECT_EQ(load_element(kF32, strided->bytes.data(), at), values[i * 3 + j]);
    }
  }
  std::vector<double> row = values;
  collapse_broadcast(s, 1u << 0, row);
  EXPECT_EQ(row, (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Result<HostInput> bcast = make_input(kF32, s, row, Layout::kBroadcast, 1u << 0);
  ASSERT_TRUE(bcast.is_ok());
  EXPECT_TRUE(bcast->view.has_broadcast());
  EXPECT_EQ(bcast->bytes.size(), 3 * sizeof(float));
}

TEST(VerifyStorageTest, GuardsDetectWritesOnEitherSide) {
  GuardedOutput out(kF32, Shape{4});
  EXPECT_FALSE(out.first_damaged_guard().has_value());
  EXPECT_TRUE(std::isnan(out.values()[0]));  // poisoned
  out.view().first_as<float>()[4] = 1.0f;
  ASSERT_TRUE(out.first_damaged_guard().has_value());
  EXPECT_EQ(*out.first_damaged_guard(), 16);
  out.reset();
  EXPECT_FALSE(out.first_damaged_guard().has_value());
  out.view().first_as<float>()[-1] = 1.0f;
  EXPECT_EQ(*out.first_damaged_guard(), -4);
}

TEST(VerifyQuantizedOperandTest, ReferenceReadsTheDequantizedValues) {
  const Shape shape{2, 32};
  std::vector<double> values(64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.37 * i);
  const std::vector<double> raw = values;
  Result<std::vector<std::byte>> bytes = quantize_operand(DType::kQ4_0, shape, values);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  EXPECT_EQ(bytes->size(), 2u * 18u);
  // The values are now what a q4_0 reader decodes: close to the data, not equal.
  std::vector<float> decoded(32);
  ASSERT_TRUE(dequantize(DType::kQ4_0, std::span(*bytes).subspan(18, 18), decoded).is_ok());
  bool changed = false;
  for (std::size_t i = 0; i < 32; ++i) {
    EXPECT_EQ(values[32 + i], decoded[i]);
    EXPECT_NEAR(values[32 + i], raw[32 + i], 0.2);
    changed = changed || values[32 + i] != raw[32 + i];
  }
  EXPECT_TRUE(changed);
  // Rows must be whole blocks.
  std::vector<double> short_row(20, 0.5);
  EXPECT_EQ(quantize_operand(DType::kQ4_0, Shape{20}, short_row).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(VerifyCasesTest, QuantizedWeightsGetWholeBlocks) {
  std::mt19937_64 rng(5);
  for (DType q : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    for (const KeyCase& k : std::vector<KeyCase>{{OpKind::kMatmul, {kF32, q, kF32}},
                                                 {OpKind::kGetRows, {q, kI32, kF32}},
                                                 {OpKind::kCast, {q, kF32}}}) {
      Result<std::vector<Case>> cases = make_cases(k.op, k.dtypes, {.strided_input = true}, rng);
      ASSERT_TRUE(cases.is_ok()) << cases.status().to_string();
      for (const Case& c : *cases) {
        for (const InputSpec& in : c.inputs) {
          if (!is_quantized(in.dtype)) continue;
          EXPECT_EQ(in.shape.inner() % block_elems(q), 0) << name(q);
          EXPECT_FALSE(in.strided);
        }
      }
    }
  }
}

}  // namespace
}  // namespace switchyard::verify_detail
