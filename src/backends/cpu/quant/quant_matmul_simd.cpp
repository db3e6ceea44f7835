// The skeleton of the integer-dot quantized matmul siblings (see
// quant_matmul_simd.h), and their entry points: the checks, the activation rows'
// preparation, the walk of the tiles over the outputs and the NaN rows, the same
// for every ISA. The ISA files (quant_matmul_*_avx2.cpp,
// quant_matmul_*_avx512vnni.cpp) provide the tiles and the activation layouts.
#include "backends/cpu/quant/quant_matmul_simd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/operand_checks.h"
#include "backends/cpu/quant/quant_matmul_amx.h"
#include "switchyard/quant_blocks.h"

namespace switchyard::cpu {
namespace {

// A 64-byte aligned run of prepared activation bytes.
struct alignas(64) CacheLine {
  std::uint8_t b[64];
};

}  // namespace

Result<QuantMatmulArgs> check_quant_matmul_simd(const KernelCall& call, DType w_dtype) {
  SWITCHYARD_ASSIGN_OR_RETURN(QuantMatmulArgs args, check_quant_matmul(call, w_dtype));
  const DType act = activation_format(w_dtype);
  if (args.k % block_elems(act) != 0) {
    return invalid_argument_error(
        fmt::format("{}: K = {} is not a whole number of {} blocks", call.name, args.k, name(act)));
  }
  return args;
}

bool row_is_finite(const float* row, std::int64_t k) {
  bool finite = true;
  for (std::int64_t i = 0; i < k; ++i) finite &= std::isfinite(row[i]);
  return finite;
}

void fill_non_finite_rows(const QuantMatmulArgs& args, std::span<const char> non_finite) {
  for (std::int64_t r = 0; r < args.rows; ++r) {
    if (non_finite[static_cast<std::size_t>(r)] != 0) {
      std::fill(args.out + r * args.n, args.out + (r + 1) * args.n,
                std::numeric_limits<float>::quiet_NaN());
    }
  }
}

// Note [Decode streams]
// A decode tile of four weight rows reads them side by side, a block of each per
// step. Four adjacent rows of a short-rowed format share 4 KiB pages (q2_k's
// rows are 1344 bytes at k = 4096: three to a page), and the L2 hardware
// prefetcher, which follows one stream per page, cannot follow three rows read
// at once there; the same bytes in rows twice as long read 0.95 of a
// one-stream read sweep's DRAM rate against 0.83. So a block of weight rows (in
// a matvec, a thread's whole chunk) is cut into four equal streams,
// and tile j reads row j of each: every one of its rows walks a range of whole
// rows in memory order, which the prefetchers follow as they follow a long row,
// and each tile prefetches the row after each of its own (Note [Decode
// prefetch] in quant_tile_inl.h). Streams over whole chunks instead
// of 64-row blocks took q2_k from 0.87 to 0.96 of the DRAM read bandwidth (two
// rounds). Outputs and their bytes do not change: each row is computed as
// before, only in another order.
void run_quant_tiles(const QuantTiles& tiles, const QuantMatmulArgs& args, const ExecContext& ctx,
                     const std::uint8_t* x, std::int64_t x_stride, std::int64_t blocks,
                     std::int64_t row_grain, std::int64_t tile_rows) {
  SWITCHYARD_CHECK(tiles.prefill != nullptr && tiles.cols != nullptr && tiles.rows1 != nullptr);
  SWITCHYARD_CHECK(tiles.prefill_rows > 0 && tiles.prefill_cols > 0);
  const auto* w = reinterpret_cast<const std::uint8_t*>(args.w);
  const std::int64_t wb = args.row_bytes;
  const std::int64_t n = args.n;
  const std::int64_t cols = tiles.prefill_cols;
  ctx.parallel_for(n, row_grain, [&](std::int64_t begin, std::int64_t end) {
    // Blocks of tile_rows keep weight rows in L2 while every activation row
    // passes over them. A call with one activation row passes once, and takes
    // its whole chunk as one block, so that its streams run as long as they can
    // (Note [Decode streams]).
    const std::int64_t block = args.rows == 1 ? end - begin : tile_rows;
    for (std::int64_t t0 = begin; t0 < end; t0 += block) {
      const std::int64_t t1 = std::min(end, t0 + block);
      // Runs fn on weight rows [j, t1) of activation rows from r, `step` weight
      // rows at a time, from j; returns where it stopped.
      const auto run = [&](QuantTileFn fn, std::int64_t step, std::int64_t r, std::int64_t j) {
        const std::uint8_t* xr = x + r * x_stride;
        for (; j + step <= t1; j += step)
          fn(w + j * wb, wb, xr, x_stride, blocks, args.out + r * n + j, n);
        return j;
      };
      // The decode tiles on weight rows [t0, t1) for activation row r, in four
      // streams of `s` rows (Note [Decode streams]), then the rows left one by one.
      const auto decode = [&](std::int64_t r) {
        const std::uint8_t* xr = x + r * x_stride;
        float* out = args.out + r * n;
        const std::int64_t s = tiles.rows4 != nullptr ? (t1 - t0) / 4 : 0;
        for (std::int64_t j = t0; j < t0 + s; ++j) {
          float four[4];
          tiles.rows4(w + j * wb, s * wb, xr, x_stride, blocks, four, n);
          for (std::int64_t q = 0; q < 4; ++q) out[j + q * s] = four[q];
        }
        for (std::int64_t j = t0 + 4 * s; j < t1; ++j) {
          tiles.rows1(w + j * wb, wb, xr, x_stride, blocks, out + j, n);
        }
      };
      std::int64_t r = 0;
      for (; r + cols <= args.rows; r += cols)
        run(tiles.cols, 1, r, run(tiles.prefill, tiles.prefill_rows, r, t0));
      if (tiles.cols4 != nullptr && r + 4 <= args.rows) {
        run(tiles.cols4, 1, r, t0);
        r += 4;
      }
      for (; r < args.rows; ++r) decode(r);
    }
  });
}

Status run_quant_matmul_simd(const KernelCall& call, DType w, const QuantSimdFormat& format) {
  if (format.tiles.rows1 == nullptr) {
    return invalid_argument_error(
        fmt::format("{}: no integer dot product for {}", call.name, name(w)));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(QuantMatmulArgs args, check_quant_matmul_simd(call, w));
  const std::int64_t x_stride =
      (args.k + format.act_elems - 1) / format.act_elems * format.act_bytes;
  std::vector<CacheLine> lines(static_cast<std::size_t>((x_stride * args.rows + 63) / 64));
  auto* x = reinterpret_cast<std::uint8_t*>(lines.data());
  // A row with NaN or infinity cannot be quantized meaningfully; its outputs are
  // set to NaN afterwards, as a float dot product would propagate them.
  std::vector<char> non_finite(static_cast<std::size_t>(args.rows), 0);
  call.ctx.parallel_for(args.rows, 1, [&](std::int64_t begin, std::int64_t end) {
    format.prepare_rows(w, args, begin, end, x, x_stride, non_finite.data());
  });
  run_quant_tiles(format.tiles, args, call.ctx, x, x_stride, args.k / block_elems(w),
                  format.row_grain, format.tile_rows);
  fill_non_finite_rows(args, non_finite);
  return Status::ok();
}

Status matmul_quant_avx2(const KernelCall& call, DType w) {
  return run_quant_matmul_simd(
      call, w, block_elems(w) == 32 ? quant_format_avx2_block32(w) : quant_format_avx2_kquant(w));
}

Status matmul_quant_avx512(const KernelCall& call, DType w) {
  return matmul_quant_avx512(
      call, w, {.gfni = cpu_features().gfni, .avx512_vbmi = cpu_features().avx512_vbmi});
}

Status matmul_quant_avx512(const KernelCall& call, DType w, Avx512QuantExtras extras) {
  return run_quant_matmul_simd(call, w,
                               block_elems(w) == 32 ? quant_format_avx512_block32(w, extras)
                                                    : quant_format_avx512_kquant(w, extras));
}

namespace {

// How the AMX siblings unpack w, or kInvalidArgument naming the kernel for a
// dtype without an AMX path.
Result<AmxFormat> checked_amx_format(const KernelCall& call, DType w) {
  const AmxFormat format = amx_format(w);
  if (format.group == 0) {
    return invalid_argument_error(fmt::format("{}: no AMX path for {}", call.name, name(w)));
  }
  return format;
}

// The activation rows of an AMX call in AmxActivations' layout, quantized as the
// AVX-512 sibling quantizes them (activation_format(w)), rows in parallel.
struct AmxActivationBuffers {
  std::vector<CacheLine> q;
  std::vector<float> scale;
  std::vector<float> sum;
  std::vector<char> non_finite;
};

AmxActivationBuffers prepare_amx_activations(const QuantMatmulArgs& args, DType w,
                                             std::int64_t group, const ExecContext& ctx) {
  const DType act = activation_format(w);
  const std::int64_t k = args.k;
  const std::int64_t groups = k / group;
  const std::int64_t tiles = (args.rows + kAmxTileRows - 1) / kAmxTileRows;
  AmxActivationBuffers x;
  // k is a whole number of 32-element blocks, so a tile (16 rows of k bytes) is a
  // whole number of cache lines. Padding rows stay zero.
  x.q.resize(static_cast<std::size_t>(tiles * kAmxTileRows * k / 64));
  x.scale.assign(static_cast<std::size_t>(tiles * groups * kAmxTileRows), 0.0f);
  x.sum.assign(x.scale.size(), 0.0f);
  x.non_finite.assign(static_cast<std::size_t>(args.rows), 0);
  auto* q = reinterpret_cast<std::int8_t*>(x.q.data());
  ctx.parallel_for(args.rows, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t t = r / kAmxTileRows;
      const std::int64_t m = r % kAmxTileRows;
      const std::size_t tile_floats = static_cast<std::size_t>(t * groups * kAmxTileRows);
      if (!amx_prepare_row(act, args.a + r * k, k, group, q + t * kAmxTileRows * k, m,
                           x.scale.data() + tile_floats, x.sum.data() + tile_floats)) {
        x.non_finite[static_cast<std::size_t>(r)] = 1;
      }
    }
  });
  return x;
}

}  // namespace

Status matmul_quant_amx(const KernelCall& call, DType w) {
  SWITCHYARD_ASSIGN_OR_RETURN(const AmxFormat format, checked_amx_format(call, w));
  SWITCHYARD_ASSIGN_OR_RETURN(QuantMatmulArgs args, check_quant_matmul_simd(call, w));
  const AmxActivationBuffers x = prepare_amx_activations(args, w, format.group, call.ctx);
  const AmxActivations view{.q = reinterpret_cast<const std::int8_t*>(x.q.data()),
                            .scale = x.scale.data(),
                            .sum = x.sum.data(),
                            .k = args.k,
                            .groups = args.k / format.group};
  const auto* w_bytes = reinterpret_cast<const std::uint8_t*>(args.w);
  const std::int64_t panels = (args.n + kAmxTileRows - 1) / kAmxTileRows;
  call.ctx.parallel_for(panels, 1, [&](std::int64_t begin, std::int64_t end) {
    // A panel is rewritten whole for every 16 weight rows; the zeroed start keeps
    // the rows past a short last panel defined.
    std::vector<CacheLine> q(static_cast<std::size_t>(kAmxTileRows * args.k / 64));
    std::vector<float> scale(static_cast<std::size_t>(kAmxTileRows * view.groups), 0.0f);
    std::vector<float> offset(scale.size(), 0.0f);
    const AmxPanel panel{.q = reinterpret_cast<std::int8_t*>(q.data()),
                         .scale = scale.data(),
                         .offset = offset.data(),
                         .layout = AmxPanelLayout::kTiles};
    for (std::int64_t p = begin; p < end; ++p) {
      const std::int64_t j0 = p * kAmxTileRows;
      const std::int64_t cols = std::min(kAmxTileRows, args.n - j0);
      amx_unpack_rows(w, w_bytes + j0 * args.row_bytes, args.row_bytes, cols, args.k, panel);
      amx_panel_product(panel, view, format, args.rows, args.out + j0, args.n, cols);
    }
  });
  fill_non_finite_rows(args, x.non_finite);
  return Status::ok();
}

namespace {

// The AMX-BF16 sibling's blocking: weight rows per block (nc) and K per pass
// (kc): the block's bf16 weights, 512 KiB, stay in L2 while every 32 activation
// rows pass over them.
constexpr std::int64_t kAmxBf16Nc = 256;
constexpr std::int64_t kAmxBf16Kc = 1024;

}  // namespace

Status matmul_quant_amx_bf16(const KernelCall& call, DType w) {
  SWITCHYARD_ASSIGN_OR_RETURN(const AmxFormat format, checked_amx_format(call, w));
  SWITCHYARD_ASSIGN_OR_RETURN(QuantMatmulArgs args, check_quant_matmul(call, w));
  const std::int64_t k = args.k;
  const std::int64_t m_pad = (args.rows + kAmxBf16Block - 1) / kAmxBf16Block * kAmxBf16Block;
  const std::int64_t n_pad = (args.n + kAmxBf16Block - 1) / kAmxBf16Block * kAmxBf16Block;
  // The activations in bf16, in tile columns of 16 rows (column c holds rows 16c
  // to 16c + 15, k / 32 tiles of 512 values), padding rows zero.
  const std::int64_t a_column = k / 32 * 512;
  std::vector<CacheLine> a_lines(
      static_cast<std::size_t>(m_pad / kAmxTileRows * a_column * 2 / 64));
  auto* a16 = reinterpret_cast<std::uint16_t*>(a_lines.data());
  std::vector<char> non_finite(static_cast<std::size_t>(args.rows), 0);
  call.ctx.parallel_for(args.rows, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      if (!amx_bf16_convert_row(args.a + r * k, k, a16 + r / kAmxTileRows * a_column,
                                r % kAmxTileRows)) {
        non_finite[static_cast<std::size_t>(r)] = 1;
      }
    }
  });
  // Outputs go straight to out when its rows and columns are whole blocks, else
  // through a padded copy.
  const bool direct = m_pad == args.rows && n_pad == args.n;
  std::vector<float> padded(direct ? 0 : static_cast<std::size_t>(m_pad * n_pad));
  float* c = direct ? args.out : padded.data();
  const std::int64_t ldc = n_pad;
  const auto* w_bytes = reinterpret_cast<const std::uint8_t*>(args.w);
  constexpr std::int64_t nc = kAmxBf16Nc;
  const std::int64_t kc_max = std::min(k, kAmxBf16Kc);
  const std::int64_t groups_max = kc_max / format.group;
  // Threads claim blocks of 32 weight rows (Note [Claimed chunks] in
  // thread_pool.cpp: early claims are large), and walk their range nc rows at a
  // time, so that a block's bf16 tiles stay in L2 whatever the claim's size.
  call.ctx.parallel_for(n_pad / kAmxBf16Block, 1, [&](std::int64_t b0, std::int64_t b1) {
    // One 16-row chunk unpacked to bytes, and the block's bf16 tiles.
    std::vector<CacheLine> q(static_cast<std::size_t>(kAmxTileRows * kc_max / 64));
    std::vector<float> scale(static_cast<std::size_t>(kAmxTileRows * groups_max), 0.0f);
    std::vector<float> offset(scale.size(), 0.0f);
    std::vector<CacheLine> tile_lines(static_cast<std::size_t>(nc * kc_max * 2 / 64));
    auto* tiles = reinterpret_cast<std::uint16_t*>(tile_lines.data());
    // The block's outputs, rows nc floats apart: the tiles reload them per pass of
    // K from memory they own, not from rows of `c` that lie N floats apart.
    std::vector<CacheLine> c_lines(static_cast<std::size_t>(m_pad * nc * 4 / 64));
    auto* c_block = reinterpret_cast<float*>(c_lines.data());
    const AmxPanel panel{.q = reinterpret_cast<std::int8_t*>(q.data()),
                         .scale = scale.data(),
                         .offset = offset.data()};
    for (std::int64_t block = b0; block < b1; block += nc / kAmxBf16Block) {
      const std::int64_t j0 = block * kAmxBf16Block;
      const std::int64_t cols = std::min(nc, (b1 - block) * kAmxBf16Block);
      for (std::int64_t k0 = 0; k0 < k; k0 += kAmxBf16Kc) {
        const std::int64_t kc = std::min(kAmxBf16Kc, k - k0);
        const std::int64_t k0_bytes = k0 / block_elems(w) * block_bytes(w);
        for (std::int64_t chunk = 0; chunk < cols / kAmxTileRows; ++chunk) {
          const std::int64_t row0 = j0 + chunk * kAmxTileRows;
          const std::int64_t rows = std::clamp<std::int64_t>(args.n - row0, 0, kAmxTileRows);
          // Rows past N: zero scale and offset give zero weights.
          std::fill(scale.begin(), scale.end(), 0.0f);
          std::fill(offset.begin(), offset.end(), 0.0f);
          amx_unpack_rows(w, w_bytes + row0 * args.row_bytes + k0_bytes, args.row_bytes, rows, kc,
                          panel);
          amx_bf16_pack_rows(panel, format.group, kc, tiles + chunk * (kc / 32) * 512);
        }
        amx_bf16_block_product(a16 + k0 / 32 * 512, a_column, tiles, kc, cols,
                               m_pad / kAmxBf16Block, c_block, nc, k0 > 0);
      }
      for (std::int64_t r = 0; r < m_pad; ++r) {
        std::copy(c_block + r * nc, c_block + r * nc + cols, c + r * ldc + j0);
      }
    }
  });
  if (!direct) {
    for (std::int64_t r = 0; r < args.rows; ++r) {
      std::copy(c + r * ldc, c + r * ldc + args.n, args.out + r * args.n);
    }
  }
  fill_non_finite_rows(args, non_finite);
  return Status::ok();
}

}  // namespace switchyard::cpu
