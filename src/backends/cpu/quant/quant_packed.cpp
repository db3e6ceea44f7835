// Packing of weight formats into the prepacked layout (quant_packed.h).
#include "backends/cpu/quant/quant_packed.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "backends/cpu/quant/quant_kernels.h"
#include "backends/cpu/quant/quant_matmul_simd.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

using namespace switchyard::quant;

// The scale d and offset m of sub-block j of the storage block at p (m is 0 for a
// symmetric format, whose zero point packed_format gives).
struct SubAffine {
  float d = 0;
  float m = 0;
};

SubAffine sub_affine(DType t, const std::uint8_t* p, int j) {
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ8_0:
    case DType::kIQ4_NL: return {load_f16(p), 0};
    case DType::kQ4_1:
    case DType::kQ5_1: return {load_f16(p), load_f16(p + 2)};
    case DType::kMXFP4: return {e8m0_half(p[0]), 0};
    case DType::kQ2_K: {
      const auto& b = *reinterpret_cast<const BlockQ2_K*>(p);
      return {load_f16(b.d) * static_cast<float>(b.scales[j] & 0xf),
              -(load_f16(b.dmin) * static_cast<float>(b.scales[j] >> 4))};
    }
    case DType::kQ3_K: {
      const auto& b = *reinterpret_cast<const BlockQ3_K*>(p);
      return {load_f16(b.d) * static_cast<float>(q3k_scale(j, b.scales)), 0};
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      // q4_k and q5_k share their first 16 bytes: d, dmin and the 12 scale bytes.
      const auto& b = *reinterpret_cast<const BlockQ4_K*>(p);
      int sc = 0, mn = 0;
      k4_scale_min(j, b.scales, sc, mn);
      return {load_f16(b.d) * static_cast<float>(sc), -(load_f16(b.dmin) * static_cast<float>(mn))};
    }
    case DType::kQ6_K: {
      const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
      return {load_f16(b.d) * static_cast<float>(b.scales[j]), 0};
    }
    case DType::kIQ4_XS: {
      const auto& b = *reinterpret_cast<const BlockIQ4_XS*>(p);
      return {load_f16(b.d) * static_cast<float>(iq4xs_scale(j, b)), 0};
    }
    default: return {};
  }
}

// The level of element value w in a sub-block (d, m) of format f, or -1 where no
// level in [0, 255] gives w back exactly.
int level_of(float w, SubAffine a, PackedFormat f) {
  const double base = f.affine ? static_cast<double>(a.m) : 0.0;
  int u = f.affine ? 0 : f.zero;
  if (a.d != 0.0f) u += static_cast<int>(std::lround((static_cast<double>(w) - base) / a.d));
  if (u < 0 || u > 255) return -1;
  const float back =
      f.affine ? a.d * static_cast<float>(u) + a.m : a.d * static_cast<float>(u - f.zero);
  return back == w ? u : -1;
}

}  // namespace

std::int64_t packed_weight_bytes(DType w, const Shape& shape) {
  const PackedFormat f = packed_format(w);
  if (f.sub == 0 || shape.rank() != 2) return -1;
  const std::int64_t n = shape[0], k = shape[1];
  if (n <= 0 || k <= 0 || k % block_elems(w) != 0) return -1;
  const std::int64_t panels = (n + kPanelRows - 1) / kPanelRows;
  return std::int64_t{sizeof(PackedHeader)} + panels * (k / f.sub) * packed_tile_bytes(f);
}

Status pack_weight(const TensorView& src, void* dst, ExecContext& ctx) {
  const DType w = src.dtype();
  const std::int64_t bytes = packed_weight_bytes(w, src.shape());
  if (bytes < 0 || !src.is_contiguous()) {
    return invalid_argument_error(fmt::format(
        "packing a weight: {} has no packed layout (a contiguous [N, K] weight of a block "
        "format is needed)",
        describe(src)));
  }
  const PackedFormat f = packed_format(w);
  const std::int64_t n = src.dim(0), k = src.dim(1);
  const std::int64_t subs = k / f.sub;
  const std::int64_t tile = packed_tile_bytes(f);
  const std::int64_t row_stride = k / block_elems(w) * block_bytes(w);
  const int subs_per_block = static_cast<int>(block_elems(w) / f.sub);
  auto* out = static_cast<std::byte*>(dst);
  PackedHeader header;
  header.dtype = static_cast<std::int32_t>(w);
  header.sub = f.sub;
  header.n = n;
  header.k = k;
  std::memcpy(out, &header, sizeof header);
  out += sizeof header;

  const auto* in = reinterpret_cast<const std::uint8_t*>(src.first());
  const std::int64_t panels = (n + kPanelRows - 1) / kPanelRows;
  std::mutex failure_mutex;
  std::string failure;
  std::atomic<bool> failed{false};
  ctx.parallel_for(panels, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> values(static_cast<std::size_t>(k));
    for (std::int64_t p = begin; p < end && !failed.load(std::memory_order_relaxed); ++p) {
      std::byte* panel = out + p * subs * tile;
      std::memset(panel, 0, static_cast<std::size_t>(subs * tile));
      for (int r = 0; r < kPanelRows; ++r) {
        const std::int64_t row = p * kPanelRows + r;
        if (row >= n) break;  // padding rows: zero levels, zero scales
        const std::uint8_t* row_bytes = in + row * row_stride;
        dequantize_row(w, row_bytes, values.data(), k);
        for (std::int64_t s = 0; s < subs; ++s) {
          const std::int64_t block = s / subs_per_block;
          const SubAffine a = sub_affine(w, row_bytes + block * block_bytes(w),
                                         static_cast<int>(s % subs_per_block));
          auto* levels = reinterpret_cast<std::uint8_t*>(panel + s * tile);
          for (int e = 0; e < f.sub; ++e) {
            const int u = level_of(values[static_cast<std::size_t>(s * f.sub + e)], a, f);
            if (u < 0) {
              std::lock_guard lock(failure_mutex);
              if (!failed.exchange(true)) {
                failure = fmt::format(
                    "packing a {} weight: row {}, element {} ({}) is no level of its block's "
                    "scale {} (a non-finite or malformed block)",
                    name(w), row, s * f.sub + e, values[static_cast<std::size_t>(s * f.sub + e)],
                    a.d);
              }
              return;
            }
            levels[(e / 4) * 64 + r * 4 + e % 4] = static_cast<std::uint8_t>(u);
          }
          auto* scales = reinterpret_cast<float*>(levels + kPanelRows * f.sub);
          scales[r] = a.d;
          if (f.affine) scales[kPanelRows + r] = a.m;
        }
      }
    }
  });
  if (failed.load()) return invalid_argument_error(failure);
  return Status::ok();
}

std::int64_t packed_act_bytes(PackedFormat f, std::int64_t k) {
  const std::int64_t bytes = k + 4 * (k / 32) + 4 * (k / f.sub);
  return (bytes + 63) / 64 * 64;
}

void store_packed_act_block(PackedFormat f, std::int64_t k, std::int64_t b,
                            const std::int8_t* levels, float d, std::uint8_t* x) {
  std::memcpy(x + 32 * b, levels, 32);
  std::memcpy(x + k + 4 * b, &d, sizeof d);
  auto* sums = reinterpret_cast<std::int32_t*>(x + k) + k / 32;
  const int subs = 32 / f.sub;
  for (int j = 0; j < subs; ++j) {
    int q = 0;
    for (int e = j * f.sub; e < (j + 1) * f.sub; ++e) q += levels[e];
    std::int32_t& out = sums[b * subs + j];
    if (f.affine) {
      const float v = d * static_cast<float>(q);
      std::memcpy(&out, &v, sizeof v);
    } else {
      out = -f.zero * q;
    }
  }
}

Status matmul_quant_packed(const KernelCall& call, DType w, const PackedTiles& tiles) {
  SWITCHYARD_ASSIGN_OR_RETURN(QuantMatmulArgs args, check_quant_matmul(call, w));
  PackedHeader header;
  std::memcpy(&header, args.w, sizeof header);
  if (header.magic != kPackedMagic || header.dtype != static_cast<std::int32_t>(w) ||
      header.n != args.n || header.k != args.k) {
    return failed_precondition_error(fmt::format(
        "{}: the weight is not packed for this sibling (it reads a [{}, {}] {} weight packed "
        "at load through its WeightPacking; these bytes are no such packing)",
        call.name, args.n, args.k, name(w)));
  }
  const PackedFormat f = packed_format(w);
  const std::int64_t x_stride = packed_act_bytes(f, args.k);
  struct alignas(64) Line {
    std::byte bytes[64];
  };
  std::vector<Line> lines(static_cast<std::size_t>(x_stride * args.rows / 64));
  auto* x = reinterpret_cast<std::uint8_t*>(lines.data());
  std::vector<char> non_finite(static_cast<std::size_t>(args.rows), 0);
  call.ctx.parallel_for(args.rows, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* a = args.a + r * args.k;
      if (!row_is_finite(a, args.k)) {
        non_finite[static_cast<std::size_t>(r)] = 1;
        continue;
      }
      tiles.prepare_row(f, a, args.k, x + r * x_stride);
    }
  });
  const auto* packed = reinterpret_cast<const std::uint8_t*>(args.w) + sizeof(PackedHeader);
  const std::int64_t panel_bytes = args.k / f.sub * packed_tile_bytes(f);
  const std::int64_t panels = (args.n + kPanelRows - 1) / kPanelRows;
  // Groups of max_panels panels (32 weight rows for the 512-bit tiles, 16 for
  // the 256-bit ones) per task. A group's bytes for kSpan elements of K (9-20
  // KiB) stay in L1 while every activation row meets them, max_rows at a time,
  // the activations streaming from L2; the outputs add up span by span.
  constexpr std::int64_t kSpan = 512;
  const std::int64_t group = tiles.max_panels;
  call.ctx.parallel_for((panels + group - 1) / group, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t p0 = group * task;
      const int count = static_cast<int>(std::min(group, panels - p0));
      const std::int64_t row0 = p0 * kPanelRows;
      const int last_rows = static_cast<int>(
          std::min<std::int64_t>(kPanelRows, args.n - (p0 + count - 1) * kPanelRows));
      for (std::int64_t k0 = 0; k0 < args.k; k0 += kSpan) {
        const PackedSpan span{k0, std::min(args.k, k0 + kSpan), k0 > 0};
        for (std::int64_t r = 0; r < args.rows; r += tiles.max_rows) {
          const int rows = static_cast<int>(std::min<std::int64_t>(tiles.max_rows, args.rows - r));
          tiles.tiles(f, packed + p0 * panel_bytes, panel_bytes, count, x + r * x_stride, x_stride,
                      rows, args.k, span, args.out + r * args.n + row0, args.n, last_rows);
        }
      }
    }
  });
  fill_non_finite_rows(args, non_finite);
  return Status::ok();
}

}  // namespace switchyard::cpu
