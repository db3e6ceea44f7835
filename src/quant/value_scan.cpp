// Scanning stored floats for NaN, infinity and subnormals (value_scan.h).
//
// Note [A scan at read bandwidth]
//   The scan exists to be run over whole models before they are trusted, so it
//   must cost about what reading the bytes costs (docs/benchmarks.md, "Checking
//   weights", measures it against a plain read of the same mapping). So:
//   - Values are classified on their bits, never converted: with `a` the bits
//     without the sign, a value is NaN or infinite when a >= the infinity pattern
//     and subnormal when 0 < a < the smallest normal.
//   - Each chunk of kChunk values is counted branch-free: non-finite and
//     subnormal counts, in 16-byte vectors for the dense dtypes (GCC vector
//     extensions, baseline SSE2, two compares per vector; no ISA-specific file),
//     four at a time in one 64-bit word for the f16 scale fields of a block
//     format, one at a time for q8_k's f32 and mxfp4's E8M0 ones. Only a
//     chunk that holds a NaN or an infinity is walked again value by value, to
//     count the two apart and find the first; subnormals, which are common in
//     healthy files (f16 weights, k-quant scales), cost one walk per call, over
//     the earliest chunk that holds one.
//   - Memory: a range is read as kStreams parts side by side and lines are
//     prefetched kPrefetchBytes ahead; one linear stream per core left the block
//     formats well short of the peer read on the 2-vCPU machine C (q4_k at 0.55
//     of it before, 0.93 after, 2026-12-04). f32 and q4_0 remain bound by this
//     code's instructions there (0.6-0.7 of the read); an AVX2 twin of
//     count_values would lift f32.
//   A block format is scanned through its scale fields alone (one or two loads per
//   block of 17 to 292 bytes); the quants between them are integers and are not
//   examined, though the hardware fetches the lines they share with the scales.
#include "switchyard/value_scan.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "switchyard/quant_blocks.h"

namespace switchyard {

// GGUF is little-endian and dense tensors are read with plain loads, as every
// kernel reads them.
static_assert(std::endian::native == std::endian::little);

void ValueScan::append(const ValueScan& later) {
  values += later.values;
  nan += later.nan;
  inf += later.inf;
  subnormal += later.subnormal;
  if (first_nonfinite < 0 && later.first_nonfinite >= 0) {
    first_nonfinite = later.first_nonfinite;
    first_nonfinite_field = later.first_nonfinite_field;
  }
  if (first_subnormal < 0 && later.first_subnormal >= 0) {
    first_subnormal = later.first_subnormal;
    first_subnormal_field = later.first_subnormal_field;
  }
}

namespace {

using quant::BlockIQ4_NL;
using quant::BlockIQ4_XS;
using quant::BlockMXFP4;
using quant::BlockQ2_K;
using quant::BlockQ3_K;
using quant::BlockQ4_0;
using quant::BlockQ4_1;
using quant::BlockQ4_K;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;

enum class ValueClass { kNormal, kNan, kInf, kSubnormal };

// 16-byte vectors of GCC's vector extensions: SSE2 on x86-64, so no ISA-specific
// build is needed. Compares give all ones (-1) per true lane, so subtracting a
// compare from a counter counts it.
// (An alias template cannot carry the attribute; a member typedef can.)
template <typename T>
struct Vec16Of {
  typedef T type __attribute__((vector_size(16)));
};
template <typename T>
using Vec16 = typename Vec16Of<T>::type;

// An IEEE binary format by its bit patterns: the magnitude mask, the infinity and
// the smallest normal magnitude.
template <typename BitsT, BitsT kAbs, BitsT kInf, BitsT kMinNormal>
struct Ieee {
  using Bits = BitsT;
  using SBits = std::make_signed_t<Bits>;
  using Vec = Vec16<SBits>;
  static Bits load(const std::byte* p) {
    Bits b;
    std::memcpy(&b, p, sizeof b);
    return b;
  }
  static ValueClass classify(Bits b) {
    const Bits a = b & kAbs;
    if (a > kInf) return ValueClass::kNan;
    if (a == kInf) return ValueClass::kInf;
    if (a != 0 && a < kMinNormal) return ValueClass::kSubnormal;
    return ValueClass::kNormal;
  }
  static bool nonfinite(Bits b) { return static_cast<Bits>(b & kAbs) >= kInf; }
  static bool subnormal(Bits b) {
    // (a - 1) wraps zero to the top, so one unsigned compare: 0 < a < kMinNormal.
    return static_cast<Bits>(static_cast<Bits>(b & kAbs) - 1) < static_cast<Bits>(kMinNormal - 1);
  }
  // Without the sign bit every value is non-negative, so signed compares (one
  // instruction each in SSE2, unlike unsigned ones) order magnitudes:
  //   non-finite:  a > kInf - 1
  //   subnormal:   0 < a < kMinNormal, i.e. a + kShift > kShift where
  //                kShift = max - (kMinNormal - 1): [1, kMinNormal) lands on the
  //                top of the range and everything from kMinNormal up wraps
  //                negative. The addition is unsigned (a signed overflow would let
  //                the compiler fold the test to a > 0), the compare signed.
  static void count(Vec v, Vec& nonfinite, Vec& subnormal) {
    constexpr auto kLastFinite = static_cast<SBits>(kInf - 1);
    constexpr auto kShift =
        static_cast<SBits>(std::numeric_limits<SBits>::max() - (kMinNormal - 1));
    const Vec a = v & static_cast<SBits>(kAbs);
    nonfinite -= a > kLastFinite;
    const Vec shifted =
        reinterpret_cast<Vec>(reinterpret_cast<Vec16<Bits>>(a) + static_cast<Bits>(kShift));
    subnormal -= shifted > kShift;
  }
};
using F64 = Ieee<std::uint64_t, 0x7fffffffffffffffu, 0x7ff0000000000000u, 0x0010000000000000u>;
using F32 = Ieee<std::uint32_t, 0x7fffffffu, 0x7f800000u, 0x00800000u>;
using F16 = Ieee<std::uint16_t, 0x7fffu, 0x7c00u, 0x0400u>;
using BF16 = Ieee<std::uint16_t, 0x7fffu, 0x7f80u, 0x0080u>;

// mxfp4's shared exponent: 0xFF is NaN, 0 is 2^-127 (value_scan.h).
struct E8M0 {
  using Bits = std::uint8_t;
  using SBits = std::int8_t;
  using Vec = Vec16<SBits>;
  static Bits load(const std::byte* p) { return static_cast<Bits>(*p); }
  static ValueClass classify(Bits b) {
    if (b == 0xff) return ValueClass::kNan;
    if (b == 0) return ValueClass::kSubnormal;
    return ValueClass::kNormal;
  }
  static bool nonfinite(Bits b) { return b == 0xff; }
  static bool subnormal(Bits b) { return b == 0; }
  static void count(Vec v, Vec& nonfinite, Vec& subnormal) {
    nonfinite -= v == -1;
    subnormal -= v == 0;
  }
};

// Values counted per chunk before the counts are looked at: large enough to
// amortise that, small enough that a chunk walked again is still in L1 and that a
// lane counter cannot overflow (sum_lanes).
constexpr std::int64_t kChunk = 1024;
// Note [Sweep streams] in bench/roofline.h: one linear stream per core leaves the
// prefetchers short of memory bandwidth, so a range is cut into this many parts
// that are read side by side, a chunk of each in turn.
constexpr int kStreams = 4;
// How far ahead of the scan lines are asked for.
constexpr std::int64_t kPrefetchBytes = 1024;

// How a scanned format lays out its floats: `kFields` values of encoding F in each
// block of `stride` bytes. A dense dtype is one field at offset 0 of a one-value
// block, and is read with whole-vector loads.
template <typename F, int kFields>
struct Layout {
  bool dense = false;
  std::size_t stride = sizeof(typename F::Bits);
  std::array<std::size_t, kFields> offsets{};
  std::array<std::string_view, kFields> names{};
};

struct Counts {
  std::int64_t nonfinite = 0;
  std::int64_t subnormal = 0;
};

template <typename F>
Counts sum_lanes(typename F::Vec nonfinite, typename F::Vec subnormal) {
  Counts c;
  for (std::size_t l = 0; l < 16 / sizeof(typename F::Bits); ++l) {
    // A lane counts at most 2 * kChunk / lanes values (256 in a 16-bit lane, 64 in
    // an 8-bit one): read unsigned, it cannot have wrapped.
    c.nonfinite += static_cast<typename F::Bits>(nonfinite[l]);
    c.subnormal += static_cast<typename F::Bits>(subnormal[l]);
  }
  return c;
}

// Contiguous values (a dense dtype): four vector loads, one 64-byte line, per
// step, and a scalar tail.
template <typename F>
Counts count_values(const std::byte* p, std::int64_t n) {
  using Vec = typename F::Vec;
  constexpr std::int64_t kSize = sizeof(typename F::Bits);
  constexpr std::int64_t kLanes = 16 / kSize;
  constexpr std::int64_t kStep = 4 * kLanes;
  Vec nonfinite{}, subnormal{};
  const auto step = [&](const std::byte* q) {
    Vec v;
    std::memcpy(&v, q, sizeof v);
    F::count(v, nonfinite, subnormal);
  };
  std::int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const std::byte* q = p + i * kSize;
    __builtin_prefetch(q + kPrefetchBytes);
    step(q);
    step(q + 16);
    step(q + 32);
    step(q + 48);
  }
  Counts c = sum_lanes<F>(nonfinite, subnormal);
  for (; i < n; ++i) {
    const typename F::Bits bits = F::load(p + i * kSize);
    c.nonfinite += F::nonfinite(bits);
    c.subnormal += F::subnormal(bits);
  }
  return c;
}

// Scale fields of blocks, one by one: a block holds one or two, so there is
// little to vectorize, and building vectors lane by lane costs more than it saves.
template <typename F, int kFields>
Counts count_fields(const Layout<F, kFields>& layout, const std::byte* p, std::int64_t n) {
  Counts c;
  std::int64_t b = 0;
  if constexpr (std::is_same_v<F, F16>) {
    // Four f16 fields at a time in the 16-bit lanes of one 64-bit word (SWAR):
    // with a = the bits without the sign (<= 0x7fff, so a lane never carries),
    // bit 15 of a + 0x0400 is set for a >= 0x7c00 (non-finite), of a + 0x7c00 for
    // a >= 0x0400 (normal or more) and of a + 0x7fff for a >= 1 (not zero).
    constexpr std::uint64_t kLanes16 = 0x0001000100010001u;
    constexpr std::uint64_t kTop = 0x8000u * kLanes16;
    constexpr std::int64_t kBlocks = 4 / kFields;
    std::uint64_t nonfinite = 0, subnormal = 0;  // per-lane counts, <= 2 * kChunk
    for (; b + kBlocks <= n; b += kBlocks) {
      std::uint64_t word = 0;
      for (std::int64_t j = 0; j < kBlocks; ++j) {
        const std::byte* block = p + static_cast<std::size_t>(b + j) * layout.stride;
        __builtin_prefetch(block + kPrefetchBytes);
        for (int f = 0; f < kFields; ++f) {
          word |= std::uint64_t{F16::load(block + layout.offsets[static_cast<std::size_t>(f)])}
                  << (16 * (j * kFields + f));
        }
      }
      const std::uint64_t a = word & (0x7fffu * kLanes16);
      const std::uint64_t at_least_normal = (a + 0x7c00u * kLanes16) & kTop;
      nonfinite += ((a + 0x0400u * kLanes16) & kTop) >> 15;
      subnormal += (((a + 0x7fffu * kLanes16) & ~at_least_normal) & kTop) >> 15;
    }
    // The lanes summed: the multiply adds all four into the top lane.
    c.nonfinite = static_cast<std::int64_t>((nonfinite * kLanes16) >> 48);
    c.subnormal = static_cast<std::int64_t>((subnormal * kLanes16) >> 48);
  }
  for (; b < n; ++b) {
    const std::byte* block = p + static_cast<std::size_t>(b) * layout.stride;
    // Every block (several per line for the small ones: a prefetch of a line
    // already asked for costs one load slot, a test to skip it costs more).
    __builtin_prefetch(block + kPrefetchBytes);
    for (std::size_t offset : layout.offsets) {
      const typename F::Bits bits = F::load(block + offset);
      c.nonfinite += F::nonfinite(bits);
      c.subnormal += F::subnormal(bits);
    }
  }
  return c;
}

// Non-finite and subnormal values in `n` (<= kChunk) blocks at `p`.
template <typename F, int kFields>
Counts count_chunk(const Layout<F, kFields>& layout, const std::byte* p, std::int64_t n) {
  return layout.dense ? count_values<F>(p, n) : count_fields(layout, p, n);
}

// A chunk whose counts found a NaN or an infinity, walked value by value in file
// order: the two counted apart and the first noted. Garbage is rare, so this runs
// for few chunks.
template <typename F, int kFields>
void walk_nonfinite(const Layout<F, kFields>& layout, const std::byte* p, std::int64_t n,
                    std::int64_t first_block, ValueScan& s) {
  for (std::int64_t b = 0; b < n; ++b) {
    const std::byte* block = p + static_cast<std::size_t>(b) * layout.stride;
    for (int f = 0; f < kFields; ++f) {
      const ValueClass k = F::classify(F::load(block + layout.offsets[f]));
      if (k != ValueClass::kNan && k != ValueClass::kInf) continue;
      (k == ValueClass::kNan ? s.nan : s.inf) += 1;
      if (s.first_nonfinite < 0) {
        s.first_nonfinite = first_block + b;
        s.first_nonfinite_field = layout.dense ? std::string_view() : layout.names[f];
      }
    }
  }
}

// The first subnormal of a chunk that holds one.
template <typename F, int kFields>
void find_subnormal(const Layout<F, kFields>& layout, const std::byte* p, std::int64_t n,
                    std::int64_t first_block, ValueScan& s) {
  for (std::int64_t b = 0; b < n; ++b) {
    const std::byte* block = p + static_cast<std::size_t>(b) * layout.stride;
    for (int f = 0; f < kFields; ++f) {
      if (F::classify(F::load(block + layout.offsets[f])) == ValueClass::kSubnormal) {
        s.first_subnormal = first_block + b;
        s.first_subnormal_field = layout.dense ? std::string_view() : layout.names[f];
        return;
      }
    }
  }
}

// Scans `blocks` blocks at `p`: kStreams parts read side by side, a chunk of each
// in turn; each part keeps its own scan, and the parts are appended in order.
// Subnormals can be common (f16 weights, k-quant scales), so a part only remembers
// its first chunk holding one, and one chunk, the earliest part's, is searched for
// the first subnormal at the end.
template <typename F, int kFields>
ValueScan scan_layout(const Layout<F, kFields>& layout, const std::byte* p, std::int64_t blocks,
                      std::int64_t first) {
  const std::int64_t chunks = (blocks + kChunk - 1) / kChunk;
  const std::int64_t chunks_per_part = (chunks + kStreams - 1) / kStreams;
  std::array<ValueScan, kStreams> parts{};
  std::array<std::int64_t, kStreams> subnormal_chunk;
  subnormal_chunk.fill(-1);
  for (std::int64_t c = 0; c < chunks_per_part; ++c) {
    for (int s = 0; s < kStreams; ++s) {
      const std::int64_t at = (s * chunks_per_part + c) * kChunk;
      if (at >= blocks) break;
      const std::int64_t n = std::min(kChunk, blocks - at);
      const std::byte* chunk = p + static_cast<std::size_t>(at) * layout.stride;
      const Counts k = count_chunk(layout, chunk, n);
      const auto si = static_cast<std::size_t>(s);
      parts[si].subnormal += k.subnormal;
      if (k.subnormal > 0 && subnormal_chunk[si] < 0) subnormal_chunk[si] = at;
      if (k.nonfinite > 0) walk_nonfinite(layout, chunk, n, first + at, parts[si]);
    }
  }
  ValueScan scan;
  for (const ValueScan& part : parts) scan.append(part);
  scan.values = blocks * kFields;
  for (const std::int64_t at : subnormal_chunk) {
    if (at < 0) continue;
    find_subnormal(layout, p + static_cast<std::size_t>(at) * layout.stride,
                   std::min(kChunk, blocks - at), first + at, scan);
    break;
  }
  return scan;
}

template <typename F>
ValueScan scan_dense(const std::byte* p, std::int64_t n, std::int64_t first) {
  Layout<F, 1> layout;
  layout.dense = true;
  return scan_layout(layout, p, n, first);
}

// One float field of a block: where it is and its name.
struct ScaleField {
  std::size_t offset = 0;
  std::string_view name;
};

// A block format whose blocks hold `kFields` scale fields of encoding F.
template <typename F, int kFields>
ValueScan scan_blocks(const std::byte* p, std::int64_t blocks, std::size_t stride,
                      std::array<ScaleField, kFields> fields, std::int64_t first) {
  Layout<F, kFields> layout;
  layout.stride = stride;
  for (int f = 0; f < kFields; ++f) {
    layout.offsets[static_cast<std::size_t>(f)] = fields[static_cast<std::size_t>(f)].offset;
    layout.names[static_cast<std::size_t>(f)] = fields[static_cast<std::size_t>(f)].name;
  }
  return scan_layout(layout, p, blocks, first);
}

template <typename Block, typename F = F16>
ValueScan scan_one(const std::byte* p, std::int64_t blocks, std::size_t d_offset,
                   std::int64_t first) {
  return scan_blocks<F, 1>(p, blocks, sizeof(Block), {{{d_offset, "d"}}}, first);
}
template <typename Block>
ValueScan scan_two(const std::byte* p, std::int64_t blocks, std::size_t d_offset, ScaleField second,
                   std::int64_t first) {
  return scan_blocks<F16, 2>(p, blocks, sizeof(Block), {{{d_offset, "d"}, second}}, first);
}

// Every dtype of dtype.def, without a default: a format added there does not
// build until its scale fields are named here (-Wswitch, warnings are errors).
ValueScan scan(DType t, const std::byte* p, std::int64_t blocks, std::int64_t first) {
  switch (t) {
    case DType::kF64: return scan_dense<F64>(p, blocks, first);
    case DType::kF32: return scan_dense<F32>(p, blocks, first);
    case DType::kF16: return scan_dense<F16>(p, blocks, first);
    case DType::kBF16: return scan_dense<BF16>(p, blocks, first);
    case DType::kQ4_0: return scan_one<BlockQ4_0>(p, blocks, offsetof(BlockQ4_0, d), first);
    case DType::kQ4_1:
      return scan_two<BlockQ4_1>(p, blocks, offsetof(BlockQ4_1, d), {offsetof(BlockQ4_1, m), "m"},
                                 first);
    case DType::kQ5_0: return scan_one<BlockQ5_0>(p, blocks, offsetof(BlockQ5_0, d), first);
    case DType::kQ5_1:
      return scan_two<BlockQ5_1>(p, blocks, offsetof(BlockQ5_1, d), {offsetof(BlockQ5_1, m), "m"},
                                 first);
    case DType::kQ8_0: return scan_one<BlockQ8_0>(p, blocks, offsetof(BlockQ8_0, d), first);
    case DType::kQ8_1:
      return scan_two<BlockQ8_1>(p, blocks, offsetof(BlockQ8_1, d), {offsetof(BlockQ8_1, s), "s"},
                                 first);
    case DType::kQ2_K:
      return scan_two<BlockQ2_K>(p, blocks, offsetof(BlockQ2_K, d),
                                 {offsetof(BlockQ2_K, dmin), "dmin"}, first);
    case DType::kQ3_K: return scan_one<BlockQ3_K>(p, blocks, offsetof(BlockQ3_K, d), first);
    case DType::kQ4_K:
      return scan_two<BlockQ4_K>(p, blocks, offsetof(BlockQ4_K, d),
                                 {offsetof(BlockQ4_K, dmin), "dmin"}, first);
    case DType::kQ5_K:
      return scan_two<BlockQ5_K>(p, blocks, offsetof(BlockQ5_K, d),
                                 {offsetof(BlockQ5_K, dmin), "dmin"}, first);
    case DType::kQ6_K: return scan_one<BlockQ6_K>(p, blocks, offsetof(BlockQ6_K, d), first);
    case DType::kQ8_K: return scan_one<BlockQ8_K, F32>(p, blocks, offsetof(BlockQ8_K, d), first);
    case DType::kIQ4_NL: return scan_one<BlockIQ4_NL>(p, blocks, offsetof(BlockIQ4_NL, d), first);
    case DType::kIQ4_XS: return scan_one<BlockIQ4_XS>(p, blocks, offsetof(BlockIQ4_XS, d), first);
    case DType::kMXFP4:
      return scan_blocks<E8M0, 1>(p, blocks, sizeof(BlockMXFP4), {{{offsetof(BlockMXFP4, e), "e"}}},
                                  first);
    case DType::kI64:
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: break;
  }
  return {};
}

}  // namespace

bool has_float_values(DType t) { return is_float(t) || is_quantized(t); }

bool subnormal_in_f32(DType t) {
  // Every dtype, without a default, as scan() above.
  switch (t) {
    case DType::kF64:
    case DType::kF32:
    case DType::kBF16:
    case DType::kQ8_K:
    case DType::kMXFP4: return true;
    case DType::kF16:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kQ8_1:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
    case DType::kI64:
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return false;
  }
  return false;
}

Result<ValueScan> scan_values(DType t, std::span<const std::byte> bytes, std::int64_t first_block) {
  const auto block = static_cast<std::size_t>(block_bytes(t));
  if (bytes.size() % block != 0) {
    return invalid_argument_error(fmt::format(
        "scan_values: {} bytes are not whole {} blocks of {} bytes", bytes.size(), name(t), block));
  }
  if (first_block < 0) {
    return invalid_argument_error(fmt::format("scan_values: first block {} < 0", first_block));
  }
  return scan(t, bytes.data(), static_cast<std::int64_t>(bytes.size() / block), first_block);
}

}  // namespace switchyard
