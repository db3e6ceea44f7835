// CPU rope, get_rows, copy, transpose, concat and attention against simple
// double-precision expectations, including strided inputs, grouped-query heads,
// causal masking and the error paths.
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu_test_util.h"
#include "switchyard/cost.h"
#include "switchyard/quant.h"

namespace switchyard::test {
namespace {

constexpr DType kFloats[] = {DType::kF32, DType::kF16, DType::kBF16};

// The one sibling at a key (a copy: the vector is usually a temporary).
BindingEntry only_entry(const std::vector<BindingEntry>& entries) {
  EXPECT_EQ(entries.size(), 1u);
  return entries.front();
}

// As expect_within, except that a relative bound is taken against `magnitude`
// (the scale the verify harness uses: sum_j p_j |v_j| for attention, |u c| + |v s|
// for rope): a sum may cancel far below the size of its terms.
void expect_within_scaled(const Tensor& got, const std::vector<double>& expected,
                          const std::vector<double>& magnitude, const BindingEntry& entry,
                          const std::string& what) {
  int failures = 0;
  for (std::int64_t i = 0; i < got.numel() && failures < 5; ++i) {
    const auto u = static_cast<std::size_t>(i);
    const double err = std::fabs(got.get(i) - expected[u]);
    const bool ok = within(got.get(i), expected[u], entry.precision, got.dtype()) ||
                    (entry.precision.max_rel && err <= *entry.precision.max_rel * magnitude[u]);
    if (!ok) {
      ++failures;
      ADD_FAILURE() << entry.name << " " << what << " element " << i << ": got " << got.get(i)
                    << ", expected " << expected[u] << " (scale " << magnitude[u] << ", "
                    << describe(entry.precision) << ")";
    }
  }
}

// --- rope ----------------------------------------------------------------------

std::vector<double> rope_expect(const Tensor& x, const std::vector<int>& pos, RopeMode mode,
                                double base, std::int64_t dims) {
  const Shape& s = x.shape();
  const std::int64_t d = s[s.rank() - 1], h = s[s.rank() - 2], t = s[s.rank() - 3];
  std::vector<double> out = x.values();
  for (std::int64_t row = 0; row < x.numel() / (h * d); ++row) {
    for (std::int64_t hh = 0; hh < h; ++hh) {
      const std::int64_t o = (row * h + hh) * d;
      for (std::int64_t i = 0; i < dims / 2; ++i) {
        const double theta = pos[row % t] * std::pow(base, -2.0 * i / dims);
        const std::int64_t iu = mode == RopeMode::kNeox ? i : 2 * i;
        const std::int64_t iv = mode == RopeMode::kNeox ? i + dims / 2 : 2 * i + 1;
        const double u = x.get(o + iu), v = x.get(o + iv);
        out[o + iu] = u * std::cos(theta) - v * std::sin(theta);
        out[o + iv] = u * std::sin(theta) + v * std::cos(theta);
      }
    }
  }
  return out;
}

// |u cos| + |v sin| per rotated element, |x| for the copied ones.
std::vector<double> rope_magnitude(const Tensor& x, const std::vector<int>& pos, RopeMode mode,
                                   double base, std::int64_t dims) {
  const Shape& s = x.shape();
  const std::int64_t d = s[s.rank() - 1], h = s[s.rank() - 2], t = s[s.rank() - 3];
  std::vector<double> out = x.values();
  for (double& v : out) v = std::fabs(v);
  for (std::int64_t row = 0; row < x.numel() / (h * d); ++row) {
    for (std::int64_t hh = 0; hh < h; ++hh) {
      const std::int64_t o = (row * h + hh) * d;
      for (std::int64_t i = 0; i < dims / 2; ++i) {
        const double theta = pos[row % t] * std::pow(base, -2.0 * i / dims);
        const std::int64_t iu = mode == RopeMode::kNeox ? i : 2 * i;
        const std::int64_t iv = mode == RopeMode::kNeox ? i + dims / 2 : 2 * i + 1;
        const double u = std::fabs(x.get(o + iu)), v = std::fabs(x.get(o + iv));
        const double c = std::fabs(std::cos(theta)), sn = std::fabs(std::sin(theta));
        out[o + iu] = u * c + v * sn;
        out[o + iv] = u * sn + v * c;
      }
    }
  }
  return out;
}

TEST(CpuRopeTest, PositionZeroIsTheIdentityAndPairsRotate) {
  const DType t = DType::kF32;
  Tensor x = Tensor::of(t, {2, 1, 2}, {1, 0, 1, 0});
  Tensor pos = Tensor::of(DType::kI32, {2}, {0, 1});
  OpParams params;
  params.rope_base = 10000;
  for (const BindingEntry& e : cpu_entries(OpKind::kRope, {t, DType::kI32, t})) {
    Tensor out(t, {2, 1, 2});
    ASSERT_TRUE(call_entry(e, {x.view(), pos.view()}, {out.view()}, params).is_ok());
    // Position 0: unchanged; position 1, pair 0: angle 1 radian.
    EXPECT_EQ(out.get(0), 1) << e.name;
    EXPECT_EQ(out.get(1), 0) << e.name;
    EXPECT_FLOAT_EQ(static_cast<float>(out.get(2)), static_cast<float>(std::cos(1.0))) << e.name;
    EXPECT_FLOAT_EQ(static_cast<float>(out.get(3)), static_cast<float>(std::sin(1.0))) << e.name;
  }
}

TEST(CpuRopeTest, NormalAndNeoxMatchDoubleWithPartialRotation) {
  for (DType t : kFloats) {
    for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
      // Head sizes below, at and past a vector, partial rotations that end inside
      // a vector.
      const std::int64_t configs[][2] = {{6, 0}, {6, 4}, {70, 0}, {70, 34}, {2, 2}};
      for (const auto& [d, rope_dims] : configs) {
        const std::vector<int> positions = {0, 7, 300};
        const std::int64_t n = 2 * 3 * 3 * d;
        Tensor x = Tensor::of(t, {2, 3, 3, d}, random_values(n, -2, 2, 51));
        Tensor pos = Tensor::of(DType::kI32, {3}, {0, 7, 300});
        OpParams params;
        params.rope_mode = mode;
        params.rope_base = 500;
        params.rope_dims = rope_dims;
        const std::int64_t dims = rope_dims == 0 ? d : rope_dims;
        const std::vector<double> expected = rope_expect(x, positions, mode, 500, dims);
        const std::vector<double> magnitude = rope_magnitude(x, positions, mode, 500, dims);
        for (const BindingEntry& e : cpu_entries(OpKind::kRope, {t, DType::kI32, t})) {
          Tensor out(t, {2, 3, 3, d});
          ASSERT_TRUE(call_entry(e, {x.view(), pos.view()}, {out.view()}, params).is_ok());
          expect_within_scaled(out, expected, magnitude, e,
                               std::string(mode == RopeMode::kNeox ? "neox" : "normal") +
                                   " d=" + std::to_string(d) + " dims=" + std::to_string(dims));
        }
      }
    }
  }
}

TEST(CpuRopeTest, RopeRefusesBadDimsAndPositions) {
  const DType t = DType::kF32;
  Tensor x(t, {3, 2, 6}), pos(DType::kI32, {3}), short_pos(DType::kI32, {2}), out(t, {3, 2, 6});
  for (const BindingEntry& e : cpu_entries(OpKind::kRope, {t, DType::kI32, t})) {
    OpParams odd;
    odd.rope_dims = 3;
    EXPECT_EQ(call_entry(e, {x.view(), pos.view()}, {out.view()}, odd).code(),
              StatusCode::kInvalidArgument);
    OpParams wide;
    wide.rope_dims = 8;
    EXPECT_EQ(call_entry(e, {x.view(), pos.view()}, {out.view()}, wide).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(call_entry(e, {x.view(), short_pos.view()}, {out.view()}).code(),
              StatusCode::kInvalidArgument);
  }
}

// --- get_rows ------------------------------------------------------------------

TEST(CpuGetRowsTest, RowsAreLookedUpAndConverted) {
  for (DType table_t : kFloats) {
    Tensor table = Tensor::of(table_t, {4, 3}, {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31.5, 32});
    Tensor idx = Tensor::of(DType::kI32, {5}, {3, 0, 0, 2, 1});
    for (DType out_t : kFloats) {
      for (const BindingEntry& e : cpu_entries(OpKind::kGetRows, {table_t, DType::kI32, out_t})) {
        Tensor out(out_t, {5, 3});
        ASSERT_TRUE(call_entry(e, {table.view(), idx.view()}, {out.view()}).is_ok()) << e.name;
        std::vector<double> expected;
        for (int r : {3, 0, 0, 2, 1}) {
          for (int c = 0; c < 3; ++c) expected.push_back(out.stored(table.get(r * 3 + c)));
        }
        EXPECT_EQ(out.values(), expected) << e.name;
      }
    }
  }
}

// The SIMD siblings convert rows of any width (1, 7, 33, past a vector, not a
// multiple of it) to exactly the reference's bytes, NaN and rounding ties included.
TEST(CpuGetRowsTest, SimdSiblingsGiveTheReferenceBytesAtOddWidths) {
  for (std::int64_t cols : {std::int64_t{1}, std::int64_t{7}, std::int64_t{33}, std::int64_t{70}}) {
    std::vector<double> values = random_values(5 * cols, -1e5, 1e5, 91);
    values[0] = std::numeric_limits<double>::quiet_NaN();
    values[values.size() - 1] = 1.0 + 0x1p-8;  // a bf16 rounding tie
    for (DType table_t : kFloats) {
      Tensor table = Tensor::of(table_t, {5, cols}, values);
      Tensor idx = Tensor::of(DType::kI32, {4}, {4, 0, 2, 4});
      for (DType out_t : kFloats) {
        const std::vector<BindingEntry> entries =
            cpu_entries(OpKind::kGetRows, {table_t, DType::kI32, out_t});
        Tensor ref_out(out_t, {4, cols});
        ASSERT_TRUE(
            call_entry(entries.back(), {table.view(), idx.view()}, {ref_out.view()}).is_ok());
        for (const BindingEntry& e : entries) {
          Tensor out(out_t, {4, cols});
          ASSERT_TRUE(call_entry(e, {table.view(), idx.view()}, {out.view()}).is_ok()) << e.name;
          EXPECT_TRUE(out.same_bytes(ref_out)) << e.name << " cols=" << cols;
        }
      }
    }
  }
}

TEST(CpuGetRowsTest, AnIndexOutOfRangeIsReportedAndNothingIsWritten) {
  const DType t = DType::kF32;
  Tensor table(t, {4, 2});
  Tensor out = Tensor::of(t, {2, 2}, {7, 7, 7, 7});
  const BindingEntry e = only_entry(cpu_entries(OpKind::kGetRows, {t, DType::kI32, t}));
  for (int bad : {4, -1}) {
    Tensor idx = Tensor::of(DType::kI32, {2}, {0, static_cast<double>(bad)});
    const Status s = call_entry(e, {table.view(), idx.view()}, {out.view()});
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.to_string();
    EXPECT_EQ(out.values(), (std::vector<double>{7, 7, 7, 7}));
  }
  Tensor idx(DType::kI32, {3});
  EXPECT_EQ(call_entry(e, {table.view(), idx.view()}, {out.view()}).code(),
            StatusCode::kInvalidArgument);
}

// A cache takes a step's rows in place: the output is the dst tensor itself, and
// only the indexed rows change (Note [Rows written in place]).
TEST(CpuSetRowsTest, WritesTheIndexedRowsInPlaceOrIntoACopy) {
  const DType t = DType::kF16;
  const BindingEntry e =
      only_entry(cpu_entries(OpKind::kSetRows, {t, DType::kF32, DType::kI32, t}));
  Tensor src = Tensor::of(DType::kF32, {2, 2}, {1.5, 2.5, 3.5, 4.5});
  Tensor idx = Tensor::of(DType::kI32, {2}, {3, 0});
  const std::vector<double> before = {9, 9, 8, 8, 7, 7, 6, 6};
  const std::vector<double> after = {3.5, 4.5, 8, 8, 7, 7, 1.5, 2.5};

  Tensor cache = Tensor::of(t, {4, 2}, before);
  ASSERT_TRUE(call_entry(e, {cache.view(), src.view(), idx.view()}, {cache.view()}).is_ok());
  EXPECT_EQ(cache.values(), after);

  Tensor dst = Tensor::of(t, {4, 2}, before);
  Tensor out = Tensor::of(t, {4, 2}, std::vector<double>(8, -1.0));
  ASSERT_TRUE(call_entry(e, {dst.view(), src.view(), idx.view()}, {out.view()}).is_ok());
  EXPECT_EQ(out.values(), after);
  EXPECT_EQ(dst.values(), before) << "dst is an input: only an aliased output changes it";
}

TEST(CpuSetRowsTest, RefusesABadIndexAndAPartialOverlapWritingNothing) {
  const DType t = DType::kF32;
  const BindingEntry e = only_entry(cpu_entries(OpKind::kSetRows, {t, t, DType::kI32, t}));
  Tensor src = Tensor::of(t, {1, 2}, {1, 2});
  const std::vector<double> before = {5, 5, 6, 6, 7, 7};
  for (int bad : {3, -1}) {
    Tensor cache = Tensor::of(t, {3, 2}, before);
    Tensor idx = Tensor::of(DType::kI32, {1}, {static_cast<double>(bad)});
    const Status s = call_entry(e, {cache.view(), src.view(), idx.view()}, {cache.view()});
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.to_string();
    EXPECT_EQ(cache.values(), before);
  }
  // An output one row into dst's memory is neither dst nor apart from it.
  Tensor big = Tensor::of(t, {4, 2}, {5, 5, 6, 6, 7, 7, 8, 8});
  Tensor idx = Tensor::of(DType::kI32, {1}, {0});
  const TensorView dst = TensorView::contiguous(big.data(), t, {3, 2});
  const TensorView shifted = TensorView::contiguous(static_cast<float*>(big.data()) + 2, t, {3, 2});
  const Status s = call_entry(e, {dst, src.view(), idx.view()}, {shifted});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("overlaps"), std::string::npos) << s.to_string();
  EXPECT_EQ(big.values(), (std::vector<double>{5, 5, 6, 6, 7, 7, 8, 8}));
}

// A q8_0 cache (Note [A q8_0 KV cache]): each written row is the bytes GGUF's
// q8_0 quantizer gives it, the other rows keep theirs, a row with a NaN reads
// back NaN in that block only, and rows of part of a block are refused.
TEST(CpuSetRowsTest, AQ8_0CacheTakesQuantizedRowsInPlace) {
  const DType t = DType::kQ8_0;
  const BindingEntry e =
      only_entry(cpu_entries(OpKind::kSetRows, {t, DType::kF32, DType::kI32, t}));
  constexpr std::int64_t kRows = 5, kCols = 64;
  const std::size_t row = static_cast<std::size_t>(*row_bytes(t, kCols));
  std::vector<std::byte> cache(kRows * row);
  for (std::size_t i = 0; i < cache.size(); ++i) cache[i] = std::byte(i % 7);  // small scales
  const std::vector<std::byte> before = cache;
  std::vector<float> src(2 * kCols);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::sin(0.3f * static_cast<float>(i));
  src[kCols + 40] = std::numeric_limits<float>::quiet_NaN();  // row 1, second block
  Tensor idx = Tensor::of(DType::kI32, {2}, {3, 1});
  const TensorView view = TensorView::contiguous(cache.data(), t, {kRows, kCols});
  ASSERT_TRUE(
      call_entry(e, {view, TensorView::contiguous(src.data(), DType::kF32, {2, kCols}), idx.view()},
                 {view})
          .is_ok());
  std::vector<std::byte> expected(row);
  ASSERT_TRUE(quantize(t, std::span(src).first(kCols), expected).is_ok());
  EXPECT_EQ(std::memcmp(cache.data() + 3 * row, expected.data(), row), 0);
  for (std::int64_t r : {0, 2, 4}) {
    EXPECT_EQ(std::memcmp(cache.data() + r * row, before.data() + r * row, row), 0) << r;
  }
  std::vector<float> back(kCols);
  ASSERT_TRUE(dequantize(t, std::span(cache).subspan(row, row), back).is_ok());
  for (std::int64_t j = 0; j < kCols; ++j) {
    EXPECT_EQ(std::isnan(back[j]), j >= 32) << j;
    if (j < 32) {
      EXPECT_NEAR(back[j], src[kCols + j], 1.0 / 254 + 1e-3) << j;
    }
  }
  const TensorView part = TensorView::contiguous(cache.data(), t, {2, 48});
  std::vector<float> narrow(48);
  Tensor one = Tensor::of(DType::kI32, {1}, {0});
  const Status s = call_entry(
      e, {part, TensorView::contiguous(narrow.data(), DType::kF32, {1, 48}), one.view()}, {part});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("whole q8_0 blocks"), std::string::npos) << s.to_string();
}

// --- layout --------------------------------------------------------------------

TEST(CpuLayoutTest, CopyMaterialisesStridedAndBroadcastViews) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32}) {
    Tensor base = Tensor::of(t, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
    const BindingEntry e = only_entry(cpu_entries(OpKind::kCopy, {t, t}));
    const std::int64_t transposed[] = {1, 4};
    Tensor out(t, {4, 3});
    ASSERT_TRUE(
        call_entry(e, {TensorView::strided(base.data(), t, {4, 3}, transposed)}, {out.view()})
            .is_ok());
    EXPECT_EQ(out.values(), (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
    const std::int64_t broadcast[] = {0, 1};
    Tensor out2(t, {2, 4});
    ASSERT_TRUE(
        call_entry(e, {TensorView::strided(base.data(), t, {2, 4}, broadcast, 4)}, {out2.view()})
            .is_ok());
    EXPECT_EQ(out2.values(), (std::vector<double>{4, 5, 6, 7, 4, 5, 6, 7}));
  }
}

// Raw element bits of a 4- or 2-byte tensor.
std::uint32_t bits_at(const Tensor& t, std::int64_t i) {
  const auto* p = static_cast<const std::byte*>(t.data());
  if (dense_bytes(t.dtype()) == 4) return reinterpret_cast<const std::uint32_t*>(p)[i];
  return reinterpret_cast<const std::uint16_t*>(p)[i];
}

// A tensor of arbitrary bit patterns (NaN payloads, subnormals and signed zeros
// included): layout kernels must move every pattern unchanged.
Tensor bit_pattern(DType t, Shape shape, std::uint32_t seed) {
  Tensor x(t, shape);
  auto* p = static_cast<std::byte*>(x.data());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const std::uint32_t h = (static_cast<std::uint32_t>(i) + seed) * 2654435761u;
    if (dense_bytes(t) == 4) {
      reinterpret_cast<std::uint32_t*>(p)[i] = h;
    } else {
      reinterpret_cast<std::uint16_t*>(p)[i] = static_cast<std::uint16_t>(h >> 16);
    }
  }
  return x;
}

constexpr DType kLayoutDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32};

TEST(CpuLayoutTest, TransposeSwapsTheLastTwoDimsAtOddSizes) {
  // Sizes below, at and past the SIMD sibling's tiles (8 columns; 8 and 16 rows)
  // and panels (128 and 256 rows), on one thread and on three.
  for (DType t : kLayoutDTypes) {
    const std::vector<BindingEntry> entries = cpu_entries(OpKind::kTranspose, {t, t});
    ASSERT_FALSE(entries.empty());
    EXPECT_EQ(entries.back().source, "portable");
    for (const BindingEntry& e : entries) {
      for (std::int64_t a : {1, 3, 8, 24, 33, 70, 300}) {
        for (std::int64_t b : {1, 7, 17, 40, 131}) {
          const Tensor x = bit_pattern(t, {2, a, b}, static_cast<std::uint32_t>(a * b));
          for (int threads : {0, 3}) {
            Tensor out(t, {2, b, a});
            ASSERT_TRUE(
                call_entry(e, {const_cast<Tensor&>(x).view()}, {out.view()}, {}, threads).is_ok());
            for (std::int64_t m = 0; m < 2; ++m) {
              for (std::int64_t i = 0; i < a; ++i) {
                for (std::int64_t j = 0; j < b; ++j) {
                  ASSERT_EQ(bits_at(out, (m * b + j) * a + i), bits_at(x, (m * a + i) * b + j))
                      << e.name << " [2, " << a << ", " << b << "] threads " << threads;
                }
              }
            }
          }
        }
      }
    }
  }
  Tensor x(DType::kF32, {2, 3}), wrong(DType::kF32, {2, 3});
  for (const BindingEntry& e : cpu_entries(OpKind::kTranspose, {DType::kF32, DType::kF32})) {
    EXPECT_EQ(call_entry(e, {x.view()}, {wrong.view()}).code(), StatusCode::kInvalidArgument)
        << e.name;
    Tensor vec(DType::kF32, {3});
    EXPECT_EQ(call_entry(e, {vec.view()}, {vec.view()}).code(), StatusCode::kInvalidArgument)
        << e.name;
  }
}

TEST(CpuLayoutTest, TransposeReadsStridedAndBroadcastInputs) {
  for (DType t : kLayoutDTypes) {
    // A [3, 37, 45] window of a [3, 40, 50] buffer, its batch broadcast from one
    // matrix, and a view with strided columns.
    const Tensor base = bit_pattern(t, {3, 40, 50}, 11);
    void* data = const_cast<Tensor&>(base).data();
    const std::int64_t window[] = {2000, 50, 1};
    const std::int64_t broadcast[] = {0, 50, 1};
    const std::int64_t every_other[] = {2000, 50, 2};
    struct View {
      const std::int64_t* strides;
      std::int64_t b;
    };
    for (const View& v : {View{window, 45}, View{broadcast, 45}, View{every_other, 25}}) {
      const TensorView x = TensorView::strided(data, t, {3, 37, v.b},
                                               std::span<const std::int64_t>(v.strides, 3), 51);
      for (const BindingEntry& e : cpu_entries(OpKind::kTranspose, {t, t})) {
        Tensor out(t, {3, v.b, 37});
        ASSERT_TRUE(call_entry(e, {x}, {out.view()}, {}, 2).is_ok()) << e.name;
        for (std::int64_t m = 0; m < 3; ++m) {
          for (std::int64_t i = 0; i < 37; ++i) {
            for (std::int64_t j = 0; j < v.b; ++j) {
              const std::int64_t src = 51 + m * v.strides[0] + i * v.strides[1] + j * v.strides[2];
              ASSERT_EQ(bits_at(out, (m * v.b + j) * 37 + i), bits_at(base, src))
                  << e.name << " strides " << v.strides[0] << ", " << v.strides[2];
            }
          }
        }
      }
    }
  }
}

// Raw bits of element i of a 4- or 2-byte buffer.
std::uint32_t bits_in(const void* p, DType t, std::int64_t i) {
  if (dense_bytes(t) == 4) return static_cast<const std::uint32_t*>(p)[i];
  return static_cast<const std::uint16_t*>(p)[i];
}

TEST(CpuLayoutTest, TransposeLargeOutputsAtOddSizes) {
  // Outputs of 8 MiB and more: the SIMD sibling streams them where whole output
  // lines can be written (Note [Transpose panels] in layout.cpp) and keeps
  // ordinary stores where not. Rows past one block (1024) and not a multiple of
  // it, columns past the 1 KiB blocks and short of a register tile, a broadcast
  // batch with padded input rows, a row count that is not a whole line (output
  // pitch off 64 bytes) and an output that does not start on a line; one thread
  // and three.
  for (DType t : kLayoutDTypes) {
    const std::int64_t line = 64 / dense_bytes(t);  // elements per cache line
    const std::int64_t b = 1029;
    struct Case {
      std::int64_t a;
      std::int64_t pad;  // extra elements per input row
      bool broadcast;    // both matrices are the first
      std::int64_t out_shift;
    };
    for (const Case& c : {Case{65 * line, 0, false, 0}, Case{65 * line, 3, true, 0},
                          Case{65 * line + 1, 0, false, 0}, Case{65 * line, 0, false, 1}}) {
      const std::int64_t pitch = b + c.pad;
      const Tensor base = bit_pattern(t, {2, c.a, pitch}, static_cast<std::uint32_t>(c.a));
      const std::int64_t strides[] = {c.broadcast ? 0 : c.a * pitch, pitch, 1};
      const TensorView x = TensorView::strided(const_cast<Tensor&>(base).data(), t, {2, c.a, b},
                                               std::span<const std::int64_t>(strides, 3));
      for (const BindingEntry& e : cpu_entries(OpKind::kTranspose, {t, t})) {
        if (e.source == "portable") continue;  // no path of its own at this size
        for (int threads : {0, 3}) {
          // The output starts c.out_shift elements past a 64-byte boundary.
          Tensor storage(t, {2 * b * c.a + 64});
          const auto start = reinterpret_cast<std::uintptr_t>(storage.data());
          auto* first =
              reinterpret_cast<std::byte*>((start + 63) / 64 * 64) + c.out_shift * dense_bytes(t);
          const TensorView out = TensorView::contiguous(first, t, {2, b, c.a});
          ASSERT_TRUE(call_entry(e, {x}, {out}, {}, threads).is_ok()) << e.name;
          std::int64_t wrong = 0;
          for (std::int64_t m = 0; m < 2; ++m) {
            for (std::int64_t i = 0; i < c.a; ++i) {
              for (std::int64_t j = 0; j < b; ++j) {
                wrong += bits_in(first, t, (m * b + j) * c.a + i) !=
                         bits_at(base, m * strides[0] + i * pitch + j);
              }
            }
          }
          EXPECT_EQ(wrong, 0) << e.name << " [2, " << c.a << ", " << b << "] pad " << c.pad
                              << " broadcast " << c.broadcast << " output shift " << c.out_shift
                              << " threads " << threads;
        }
      }
    }
  }
}

TEST(CpuLayoutTest, ConcatJoinsAlongAnyAxis) {
  const DType t = DType::kF32;
  Tensor a = Tensor::of(t, {2, 2}, {1, 2, 3, 4});
  Tensor b = Tensor::of(t, {2, 1}, {5, 6});
  Tensor c = Tensor::of(t, {2, 3}, {7, 8, 9, 10, 11, 12});
  for (const BindingEntry& e3 : cpu_entries(OpKind::kConcat, {t, t, t, t})) {
    OpParams last;
    last.axis = -1;
    Tensor out(t, {2, 6});
    ASSERT_TRUE(call_entry(e3, {a.view(), b.view(), c.view()}, {out.view()}, last).is_ok());
    EXPECT_EQ(out.values(), (std::vector<double>{1, 2, 5, 7, 8, 9, 3, 4, 6, 10, 11, 12}))
        << e3.name;
    Tensor bad_out(t, {2, 5});
    EXPECT_EQ(call_entry(e3, {a.view(), b.view(), c.view()}, {bad_out.view()}, last).code(),
              StatusCode::kInvalidArgument)
        << e3.name;
  }
  for (const BindingEntry& e2 : cpu_entries(OpKind::kConcat, {t, t, t})) {
    // Axis 0, with the second input a transposed (strided) view.
    OpParams first;
    first.axis = 0;
    const std::int64_t transposed[] = {1, 2};
    Tensor out0(t, {4, 2});
    ASSERT_TRUE(call_entry(e2, {a.view(), TensorView::strided(a.data(), t, {2, 2}, transposed)},
                           {out0.view()}, first)
                    .is_ok());
    EXPECT_EQ(out0.values(), (std::vector<double>{1, 2, 3, 4, 1, 3, 2, 4})) << e2.name;
    // Mismatched dims off the axis, wrong totals and bad axes are refused.
    EXPECT_EQ(call_entry(e2, {a.view(), b.view()}, {out0.view()}, first).code(),
              StatusCode::kInvalidArgument)
        << e2.name;
    OpParams far;
    far.axis = 2;
    EXPECT_EQ(call_entry(e2, {a.view(), a.view()}, {out0.view()}, far).code(),
              StatusCode::kInvalidArgument)
        << e2.name;
  }
}

// Every sibling against the definition, at sizes whose flat output spans
// several parallel chunks (so chunks start and end inside runs), with runs of one
// element and of thousands, and a strided input among contiguous ones.
TEST(CpuLayoutTest, ConcatCopiesRunsOfAnyLengthAcrossThreads) {
  struct Config {
    std::vector<std::int64_t> dims;  // the output's; inputs split `axis` as 1, 2, rest
    int axis;
    bool strided_middle;
  };
  const Config configs[] = {{{7}, 0, false},        {{3, 9, 5}, 1, false}, {{3, 9, 5}, 2, true},
                            {{2, 40000}, 1, false}, {{70000, 3}, 1, true}, {{5, 30000}, 0, false}};
  for (DType t : kLayoutDTypes) {
    const std::vector<BindingEntry> entries = cpu_entries(OpKind::kConcat, {t, t, t, t});
    ASSERT_FALSE(entries.empty());
    EXPECT_EQ(entries.back().source, "portable");
    for (const Config& cfg : configs) {
      const int rank = static_cast<int>(cfg.dims.size());
      const std::int64_t total = cfg.dims[static_cast<std::size_t>(cfg.axis)];
      const std::int64_t split[] = {1, 2, total - 3};
      std::vector<Tensor> owned;
      std::vector<TensorView> views;
      for (int k = 0; k < 3; ++k) {
        std::vector<std::int64_t> d = cfg.dims;
        d[static_cast<std::size_t>(cfg.axis)] = split[k];
        owned.push_back(
            bit_pattern(t, Shape(std::span<const std::int64_t>(d)), static_cast<std::uint32_t>(k)));
      }
      for (int k = 0; k < 3; ++k) {
        TensorView v = owned[static_cast<std::size_t>(k)].view();
        if (k == 1 && cfg.strided_middle) {
          // The same values, read through strides over a copy laid out with the
          // dims in reverse order (column-major).
          const Shape s = v.shape();
          Tensor& src = owned[1];
          Tensor flipped(t, s);
          std::vector<std::int64_t> strides(static_cast<std::size_t>(rank));
          std::int64_t step = 1;
          for (int d = 0; d < rank; ++d) {
            strides[static_cast<std::size_t>(d)] = step;
            step *= s[d];
          }
          for (std::int64_t i = 0; i < s.numel(); ++i) {
            std::int64_t rem = i, off = 0;
            for (int d = rank - 1; d >= 0; --d) {
              off += (rem % s[d]) * strides[static_cast<std::size_t>(d)];
              rem /= s[d];
            }
            std::memcpy(static_cast<std::byte*>(flipped.data()) + off * dense_bytes(t),
                        static_cast<const std::byte*>(src.data()) + i * dense_bytes(t),
                        static_cast<std::size_t>(dense_bytes(t)));
          }
          owned.push_back(std::move(flipped));
          v = TensorView::strided(owned.back().data(), t, s, strides);
        }
        views.push_back(v);
      }
      OpParams params;
      params.axis = cfg.axis;
      std::int64_t outer = 1, inner = 1;
      for (int d = 0; d < cfg.axis; ++d) outer *= cfg.dims[static_cast<std::size_t>(d)];
      for (int d = cfg.axis + 1; d < rank; ++d) inner *= cfg.dims[static_cast<std::size_t>(d)];
      for (const BindingEntry& e : entries) {
        for (int threads : {0, 3}) {
          Tensor out(t, Shape(std::span<const std::int64_t>(cfg.dims)));
          ASSERT_TRUE(call_entry(e, views, {out.view()}, params, threads).is_ok()) << e.name;
          std::int64_t pos = 0;
          for (std::int64_t o = 0; o < outer; ++o) {
            for (int k = 0; k < 3; ++k) {
              const std::int64_t run = split[k] * inner;
              for (std::int64_t i = 0; i < run; ++i, ++pos) {
                ASSERT_EQ(bits_at(out, pos),
                          bits_at(owned[static_cast<std::size_t>(k)], o * run + i))
                    << e.name << " axis " << cfg.axis << " threads " << threads;
              }
            }
          }
        }
      }
    }
  }
}

// --- attention -----------------------------------------------------------------

std::vector<double> attention_expect(const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor* mask, double scale, bool causal,
                                     std::int64_t offset) {
  const Shape& qs = q.shape();
  const Shape& ks = k.shape();
  const std::int64_t sq = qs[1], h = qs[2], dh = qs[3], skv = ks[1], hkv = ks[2];
  std::vector<double> out(static_cast<std::size_t>(q.numel()), 0.0);
  for (std::int64_t b = 0; b < qs[0]; ++b) {
    for (std::int64_t s = 0; s < sq; ++s) {
      for (std::int64_t hh = 0; hh < h; ++hh) {
        const std::int64_t kh = hh / (h / hkv);
        std::vector<double> l(static_cast<std::size_t>(skv));
        double m = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < skv; ++j) {
          double dot = 0;
          for (std::int64_t e = 0; e < dh; ++e) {
            dot += q.get(((b * sq + s) * h + hh) * dh + e) *
                   k.get(((b * skv + j) * hkv + kh) * dh + e);
          }
          l[j] = dot * scale + (mask ? mask->get(s * skv + j) : 0.0);
          if (causal && j > s + offset) l[j] = -std::numeric_limits<double>::infinity();
          m = std::max(m, l[j]);
        }
        if (m == -std::numeric_limits<double>::infinity()) continue;
        double sum = 0;
        for (double& x : l) sum += (x = std::exp(x - m));
        for (std::int64_t e = 0; e < dh; ++e) {
          double acc = 0;
          for (std::int64_t j = 0; j < skv; ++j)
            acc += l[j] * v.get(((b * skv + j) * hkv + kh) * dh + e);
          out[((b * sq + s) * h + hh) * dh + e] = acc / sum;
        }
      }
    }
  }
  return out;
}

TEST(CpuAttentionTest, GroupedQueryCausalMaskedAttentionMatchesDouble) {
  const std::pair<DType, DType> kinds[] = {{DType::kF32, DType::kF32},
                                           {DType::kF32, DType::kF16},
                                           {DType::kF32, DType::kBF16},
                                           {DType::kF16, DType::kF16},
                                           {DType::kBF16, DType::kBF16}};
  for (auto [qt, kvt] : kinds) {
    Tensor q = Tensor::of(qt, {2, 3, 4, 5}, random_values(120, -1, 1, 61));
    Tensor k = Tensor::of(kvt, {2, 7, 2, 5}, random_values(140, -1, 1, 62));
    Tensor v = Tensor::of(kvt, {2, 7, 2, 5}, random_values(140, -1, 1, 63));
    Tensor mask = Tensor::of(qt, {3, 7}, random_values(21, -1, 0, 64));
    for (bool with_mask : {false, true}) {
      for (bool causal : {false, true}) {
        OpParams params;
        params.scale = 0.45f;
        params.causal = causal;
        params.query_offset = 4;
        const DTypeList dtypes =
            with_mask ? DTypeList{qt, kvt, kvt, qt, qt} : DTypeList{qt, kvt, kvt, qt};
        for (const BindingEntry& e : cpu_entries(OpKind::kAttention, dtypes)) {
          std::vector<TensorView> in = {q.view(), k.view(), v.view()};
          if (with_mask) in.push_back(mask.view());
          Tensor out(qt, {2, 3, 4, 5});
          ASSERT_TRUE(call_entry(e, in, {out.view()}, params).is_ok()) << e.name;
          expect_within(
              out, attention_expect(q, k, v, with_mask ? &mask : nullptr, params.scale, causal, 4),
              e, causal ? "causal" : "full");
        }
      }
    }
  }
}

TEST(CpuAttentionTest, AttentionRefusesHeadsThatDoNotGroup) {
  const DType t = DType::kF32;
  Tensor q(t, {1, 2, 3, 4}), k(t, {1, 5, 2, 4}), v(t, {1, 5, 2, 4}), out(t, {1, 2, 3, 4});
  for (const BindingEntry& e : cpu_entries(OpKind::kAttention, {t, t, t, t})) {
    EXPECT_EQ(call_entry(e, {q.view(), k.view(), v.view()}, {out.view()}).code(),
              StatusCode::kInvalidArgument)
        << e.name;
    Tensor q2(t, {1, 2, 4, 4}), v_short(t, {1, 4, 2, 4}), out2(t, {1, 2, 4, 4});
    EXPECT_EQ(call_entry(e, {q2.view(), k.view(), v_short.view()}, {out2.view()}).code(),
              StatusCode::kInvalidArgument)
        << e.name;
  }
}

// The f32 SIMD siblings: several key blocks of 32 keys,
// head dims that are not a multiple of the vector width, three query heads per kv
// head, a mask with -inf entries and a fully masked row, causal limits that fall
// inside a block and rows with no key at all.
TEST(CpuAttentionTest, EverySiblingMatchesDoubleAcrossKeyBlocksAndOddHeadDims) {
  const std::pair<DType, DType> kinds[] = {
      {DType::kF32, DType::kF32}, {DType::kF32, DType::kF16}, {DType::kBF16, DType::kBF16}};
  for (auto [qt, kvt] : kinds) {
    // {sq, h, hkv, dh}: odd head dims; decoding shapes (at most 4 rows per kv head,
    // whole-vector heads) that read the key and value rows in place.
    const std::int64_t configs[][4] = {{5, 6, 2, 1},  {5, 6, 2, 7},  {5, 6, 2, 33},
                                       {1, 4, 2, 32}, {1, 4, 1, 48}, {2, 2, 1, 16}};
    for (const auto& cfg : configs) {
      const std::int64_t sq = cfg[0], h = cfg[1], hkv = cfg[2], dh = cfg[3], skv = 70;
      Tensor q = Tensor::of(qt, {1, sq, h, dh}, random_values(sq * h * dh, -1, 1, 71));
      Tensor k = Tensor::of(kvt, {1, skv, hkv, dh}, random_values(skv * hkv * dh, -1, 1, 72));
      const std::vector<double> vs = random_values(skv * hkv * dh, -1, 1, 73);
      Tensor v = Tensor::of(kvt, {1, skv, hkv, dh}, vs);
      std::vector<double> vs_abs = vs;
      for (double& x : vs_abs) x = std::fabs(x);
      Tensor v_abs = Tensor::of(kvt, {1, skv, hkv, dh}, vs_abs);
      std::vector<double> m = random_values(sq * skv, -2, 0, 74);
      for (std::size_t i = 3; i < m.size(); i += 5) m[i] = -std::numeric_limits<double>::infinity();
      // Query row 1 (where there is one) has every key masked.
      for (std::int64_t j = 0; sq > 1 && j < skv; ++j)
        m[static_cast<std::size_t>(skv + j)] = -std::numeric_limits<double>::infinity();
      Tensor mask = Tensor::of(qt, {sq, skv}, m);
      for (bool with_mask : {false, true}) {
        for (std::int64_t offset : {std::int64_t{-2}, std::int64_t{61}}) {
          for (bool causal : {false, true}) {
            OpParams params;
            params.scale = 0.8f;
            params.causal = causal;
            params.query_offset = offset;
            const DTypeList dtypes =
                with_mask ? DTypeList{qt, kvt, kvt, qt, qt} : DTypeList{qt, kvt, kvt, qt};
            const std::vector<double> expected = attention_expect(
                q, k, v, with_mask ? &mask : nullptr, params.scale, causal, offset);
            const std::vector<double> magnitude = attention_expect(
                q, k, v_abs, with_mask ? &mask : nullptr, params.scale, causal, offset);
            for (const BindingEntry& e : cpu_entries(OpKind::kAttention, dtypes)) {
              std::vector<TensorView> in = {q.view(), k.view(), v.view()};
              if (with_mask) in.push_back(mask.view());
              Tensor out(qt, {1, sq, h, dh});
              ASSERT_TRUE(call_entry(e, in, {out.view()}, params).is_ok()) << e.name;
              expect_within_scaled(out, expected, magnitude, e,
                                   "dh=" + std::to_string(dh) +
                                       " offset=" + std::to_string(offset) +
                                       (causal ? " causal" : "") + (with_mask ? " mask" : ""));
            }
          }
        }
      }
    }
  }
}

// A causal mask given as a tensor (the llama graph's: 0 up to the row's
// position, -inf after) gives the same bytes as the causal flag: the SIMD
// siblings skip the keys past each row's last unmasked one, so the values stored
// there (here NaN, as a stale or unwritten cache row might hold) never reach the
// output.
TEST(CpuAttentionTest, MaskedKeyTailsAreSkippedAsTheCausalFlagSkipsThem) {
  const DType t = DType::kF32;
  const std::int64_t sq = 40, h = 8, dh = 64, hkv = 2, past = 23, skv = past + sq + 9;
  Tensor q = Tensor::of(t, {1, sq, h, dh}, random_values(sq * h * dh, -1, 1, 91));
  Tensor k = Tensor::of(t, {1, skv, hkv, dh}, random_values(skv * hkv * dh, -1, 1, 92));
  std::vector<double> vs = random_values(skv * hkv * dh, -1, 1, 93);
  // Keys past the last query position: never visible to any row.
  for (std::int64_t i = (past + sq) * hkv * dh; i < skv * hkv * dh; ++i) {
    vs[static_cast<std::size_t>(i)] = std::numeric_limits<double>::quiet_NaN();
  }
  Tensor v = Tensor::of(t, {1, skv, hkv, dh}, vs);
  std::vector<double> m(static_cast<std::size_t>(sq * skv), 0.0);
  for (std::int64_t i = 0; i < sq; ++i) {
    for (std::int64_t j = past + i + 1; j < skv; ++j) {
      m[static_cast<std::size_t>(i * skv + j)] = -std::numeric_limits<double>::infinity();
    }
  }
  Tensor mask = Tensor::of(t, {sq, skv}, m);
  Tensor zeros = Tensor::of(t, {sq, skv}, std::vector<double>(m.size(), 0.0));
  OpParams with_tensor;
  with_tensor.scale = 0.125f;
  OpParams with_flag = with_tensor;
  with_flag.causal = true;
  with_flag.query_offset = past;
  int simd = 0;
  for (const BindingEntry& e : cpu_entries(OpKind::kAttention, {t, t, t, t, t})) {
    if (e.name.find("__cpu_ref") != std::string::npos) continue;
    ++simd;
    Tensor masked(t, {1, sq, h, dh}), flagged(t, {1, sq, h, dh});
    ASSERT_TRUE(
        call_entry(e, {q.view(), k.view(), v.view(), mask.view()}, {masked.view()}, with_tensor)
            .is_ok());
    ASSERT_TRUE(
        call_entry(e, {q.view(), k.view(), v.view(), zeros.view()}, {flagged.view()}, with_flag)
            .is_ok());
    EXPECT_TRUE(masked.same_bytes(flagged)) << e.name;
    for (std::int64_t i = 0; i < masked.numel(); ++i) {
      ASSERT_TRUE(std::isfinite(masked.get(i))) << e.name << " element " << i;
    }
  }
  const cpu::CpuFeatures& f = cpu::cpu_features();
  EXPECT_EQ(simd, (f.avx512 && f.f16c ? 1 : 0) + (f.avx2 && f.f16c ? 1 : 0));
}

// A NaN in one query row makes that row NaN and no other; a row whose keys are
// all masked gives zeros (softmax over nothing); for a decode item of a few rows
// and for a prompt's items of many rows (q in the lanes), with an odd head size.
TEST(CpuAttentionTest, ANaNRowStaysItsOwnAndAFullyMaskedRowIsZero) {
  const DType t = DType::kF32;
  const std::int64_t h = 8, hkv = 2, dh = 40, skv = 70;
  const double inf = std::numeric_limits<double>::infinity();
  // One query position is one item of four rows; two or more are items of many.
  for (std::int64_t sq : {std::int64_t{1}, std::int64_t{2}, std::int64_t{12}}) {
    const std::int64_t nan_position = sq - 1, nan_head = 2, masked_position = sq > 1 ? 0 : -1;
    std::vector<double> qs = random_values(sq * h * dh, -1, 1, 111);
    qs[static_cast<std::size_t>((nan_position * h + nan_head) * dh + 7)] =
        std::numeric_limits<double>::quiet_NaN();
    Tensor q = Tensor::of(t, {1, sq, h, dh}, qs);
    Tensor k = Tensor::of(t, {1, skv, hkv, dh}, random_values(skv * hkv * dh, -1, 1, 112));
    Tensor v = Tensor::of(t, {1, skv, hkv, dh}, random_values(skv * hkv * dh, -1, 1, 113));
    std::vector<double> m(static_cast<std::size_t>(sq * skv), 0.0);
    for (std::int64_t j = 0; j < skv; ++j) {
      if (masked_position >= 0) m[static_cast<std::size_t>(masked_position * skv + j)] = -inf;
      if (j % 3 == 0) m[static_cast<std::size_t>((sq - 1) * skv + j)] = -inf;
    }
    Tensor mask = Tensor::of(t, {sq, skv}, m);
    OpParams params;
    params.scale = 0.125f;
    int simd = 0;
    for (const BindingEntry& e : cpu_entries(OpKind::kAttention, {t, t, t, t, t})) {
      if (e.name.find("__cpu_ref") != std::string::npos) continue;
      ++simd;
      Tensor out(t, {1, sq, h, dh});
      ASSERT_TRUE(
          call_entry(e, {q.view(), k.view(), v.view(), mask.view()}, {out.view()}, params).is_ok())
          << e.name;
      for (std::int64_t s = 0; s < sq; ++s) {
        for (std::int64_t head = 0; head < h; ++head) {
          for (std::int64_t i = 0; i < dh; ++i) {
            const double got = out.get((s * h + head) * dh + i);
            const std::string where = e.name + ", " + std::to_string(sq) + " queries, position " +
                                      std::to_string(s) + " head " + std::to_string(head);
            if (s == nan_position && head == nan_head) {
              ASSERT_TRUE(std::isnan(got)) << where;
            } else if (s == masked_position) {
              ASSERT_EQ(got, 0.0) << where;
            } else {
              ASSERT_TRUE(std::isfinite(got)) << where;
            }
          }
        }
      }
    }
    const cpu::CpuFeatures& f = cpu::cpu_features();
    EXPECT_EQ(simd, (f.avx512 && f.f16c ? 1 : 0) + (f.avx2 && f.f16c ? 1 : 0));
  }
}

// q8_0 keys and values (a q8_0 KV cache) are read as their exact values: every
// q8_0 sibling gives the bytes of its f32 counterpart (same variant, same mask)
// on the dequantized keys and values, for a decode row (whose f32 kernel reads
// the rows in place) and a prompt (packed rows) over several key blocks.
TEST(CpuAttentionTest, Q8_0KeysAndValuesGiveTheF32SiblingsBytes) {
  const DType f32 = DType::kF32, q8 = DType::kQ8_0;
  const std::int64_t h = 8, hkv = 2, dh = 64, skv = 75;
  const auto quantized = [&](std::uint64_t seed) {
    std::vector<float> values(static_cast<std::size_t>(skv * hkv * dh));
    const std::vector<double> drawn = random_values(skv * hkv * dh, -1, 1, seed);
    std::copy(drawn.begin(), drawn.end(), values.begin());
    std::vector<std::byte> bytes(static_cast<std::size_t>(*row_bytes(q8, skv * hkv * dh)));
    EXPECT_TRUE(quantize(q8, values, bytes).is_ok());
    EXPECT_TRUE(dequantize(q8, bytes, values).is_ok());
    return std::pair(std::move(bytes), values);
  };
  auto [kq, kf] = quantized(101);
  auto [vq, vf] = quantized(102);
  const Shape kv_shape{1, skv, hkv, dh};
  const TensorView k8 = TensorView::contiguous(kq.data(), q8, kv_shape);
  const TensorView v8 = TensorView::contiguous(vq.data(), q8, kv_shape);
  const TensorView k32 = TensorView::contiguous(kf.data(), f32, kv_shape);
  const TensorView v32 = TensorView::contiguous(vf.data(), f32, kv_shape);
  int compared = 0;
  for (std::int64_t sq : {std::int64_t{1}, std::int64_t{6}}) {
    Tensor q = Tensor::of(f32, {1, sq, h, dh}, random_values(sq * h * dh, -1, 1, 103));
    OpParams params;
    params.scale = 0.125f;
    params.causal = true;
    params.query_offset = skv - sq;
    for (const BindingEntry& e : cpu_entries(OpKind::kAttention, {f32, q8, q8, f32})) {
      const std::string variant = e.name.substr(e.name.find("__"));
      const BindingEntry* dense = nullptr;
      const auto siblings = cpu_entries(OpKind::kAttention, {f32, f32, f32, f32});
      for (const BindingEntry& d : siblings) {
        if (d.name.ends_with(variant)) dense = &d;
      }
      ASSERT_NE(dense, nullptr) << e.name;
      Tensor got(f32, {1, sq, h, dh}), want(f32, {1, sq, h, dh});
      ASSERT_TRUE(call_entry(e, {q.view(), k8, v8}, {got.view()}, params).is_ok()) << e.name;
      ASSERT_TRUE(call_entry(*dense, {q.view(), k32, v32}, {want.view()}, params).is_ok());
      EXPECT_TRUE(got.same_bytes(want)) << e.name << ", " << sq << " queries";
      ++compared;
    }
  }
  EXPECT_GE(compared, 2);
  // A head that is not whole blocks is refused by name.
  const TensorView narrow_k = TensorView::contiguous(kq.data(), q8, {1, 3, 1, 48});
  Tensor q = Tensor::of(f32, {1, 1, 1, 48}, std::vector<double>(48, 0.5));
  Tensor out(f32, {1, 1, 1, 48});
  const BindingEntry e = cpu_entries(OpKind::kAttention, {f32, q8, q8, f32}).front();
  const Status s = call_entry(e, {q.view(), narrow_k, narrow_k}, {out.view()});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("whole blocks of 32"), std::string::npos) << s.to_string();
}

TEST(CpuAttentionTest, SimdSiblingsGiveTheSameBytesOnOneAndThreeThreads) {
  const DType t = DType::kF32;
  const std::int64_t sq = 37, h = 8, dh = 64, skv = 150, hkv = 2;
  Tensor q = Tensor::of(t, {2, sq, h, dh}, random_values(2 * sq * h * dh, -1, 1, 81));
  Tensor k = Tensor::of(t, {2, skv, hkv, dh}, random_values(2 * skv * hkv * dh, -1, 1, 82));
  Tensor v = Tensor::of(t, {2, skv, hkv, dh}, random_values(2 * skv * hkv * dh, -1, 1, 83));
  OpParams params;
  params.scale = 0.125f;
  params.causal = true;
  params.query_offset = 100;
  int simd = 0;
  for (const BindingEntry& e : cpu_entries(OpKind::kAttention, {t, t, t, t})) {
    ASSERT_TRUE(e.precision.deterministic_across_threads) << e.name;
    Tensor one(t, {2, sq, h, dh}), three(t, {2, sq, h, dh});
    ASSERT_TRUE(call_entry(e, {q.view(), k.view(), v.view()}, {one.view()}, params, 1).is_ok());
    ASSERT_TRUE(call_entry(e, {q.view(), k.view(), v.view()}, {three.view()}, params, 3).is_ok());
    EXPECT_TRUE(one.same_bytes(three)) << e.name;
    simd += e.name.find("__cpu_ref") == std::string::npos ? 1 : 0;
  }
  const cpu::CpuFeatures& f = cpu::cpu_features();
  EXPECT_EQ(simd, (f.avx512 && f.f16c ? 1 : 0) + (f.avx2 && f.f16c ? 1 : 0));
}

// The planner ranks siblings by estimated time: the f32 siblings must come out
// ahead of the double reference at the shapes of a model's prefill and decode.
TEST(CpuAttentionTest, SimdSiblingsAreEstimatedFasterThanTheDoubleReference) {
  const DType t = DType::kF32;
  const std::vector<Shape> prefill = {
      {1, 512, 32, 128}, {1, 512, 8, 128}, {1, 512, 8, 128}, {1, 512, 32, 128}};
  const std::vector<Shape> decode = {
      {1, 1, 32, 128}, {1, 600, 8, 128}, {1, 600, 8, 128}, {1, 1, 32, 128}};
  const std::vector<DType> dtypes = {t, t, t, t};
  const BackendCaps caps;
  for (const std::vector<Shape>* shapes : {&prefill, &decode}) {
    double ref_ns = 0;
    std::vector<double> simd_ns;
    for (const BindingEntry& e : cpu_entries(OpKind::kAttention, {t, t, t, t})) {
      const double ns =
          e.estimate({OpKind::kAttention, *shapes, dtypes, nullptr, nullptr}).time_ns(caps);
      if (e.name.find("__cpu_ref") != std::string::npos) {
        ref_ns = ns;
      } else {
        simd_ns.push_back(ns);
      }
    }
    for (double ns : simd_ns) EXPECT_LT(ns, ref_ns);
  }
}

}  // namespace
}  // namespace switchyard::test
