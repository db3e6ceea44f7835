// Scanning stored values for numerical garbage: NaN, infinity and subnormals in
// the floats a tensor's bytes hold, without converting them.
//
// Overview
//   What a tensor "holds as floats" depends on its dtype:
//     - f32, f16, bf16, f64: every element.
//     - a block format: each block's float scales, and nothing else, because the
//       quants are small integers that cannot be non-finite. The scales are the
//       f16 `d` of every format that has one, the f16 `m` (q4_1, q5_1) and `s`
//       (q8_1), the f16 super-block `d` and `dmin` of the k-quants, the f32 `d` of
//       q8_k, and the E8M0 exponent `e` of mxfp4 (quant_blocks.h names them all).
//       The k-quants' 4- to 8-bit sub-block scales are integers.
//     - integer and bool dtypes: nothing (`values` stays 0).
//   mxfp4's E8M0 byte has no infinity; 0xFF is its NaN (the OCP MX
//   specification). GGUF decoders, ours included (quant::e8m0_half), read 0xFF as
//   2^127, which makes every non-zero code of the block overflow to infinity in
//   f32 anyway. e = 0, a scale of 2^-127, is counted as subnormal (below f32's
//   normal range).
//
//   Subnormals are counted for every dtype, but they matter only where they stay
//   subnormal in f32, the type kernels compute in (subnormal_in_f32): f32, bf16
//   and f64 values, q8_k's f32 scale, mxfp4's e = 0. An f16 subnormal (below
//   2^-14) widens to a normal f32; k-quant super-block scales are routinely that
//   small (a q6_k `d` is the block's largest magnitude / 4064).
//
//   A scan is one read of the bytes with no per-element branches on the common
//   (clean) path: chunks are first tested for any special value and only a chunk
//   that holds one is classified element by element. It reads only the span it is
//   given, whole blocks, never past its end.
//
// Indices
//   A scan reports positions in blocks of the dtype (dtype.def's block_elems): for
//   the dense dtypes a block is one element, so the index is the element's; for a
//   block format it is the block's, and `first_*_field` names the scale field.
//
// Example
//   SWITCHYARD_ASSIGN_OR_RETURN(ValueScan s, scan_values(DType::kQ4_0, bytes));
//   if (!s.finite()) fmt::print("NaN or Inf in block {} ({})\n", s.first_nonfinite,
//                               s.first_nonfinite_field);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "switchyard/dtype.h"
#include "switchyard/status.h"

namespace switchyard {

// What a scan of some bytes of one dtype found.
struct ValueScan {
  // Float values examined: elements of a dense float dtype, scale fields of a
  // block format (two per q4_k block: d and dmin).
  std::int64_t values = 0;
  std::int64_t nan = 0;
  std::int64_t inf = 0;
  std::int64_t subnormal = 0;
  // Index (in blocks, see "Indices") of the first block holding a NaN or an
  // infinity, -1 when there is none; for a block format, the field that holds it
  // ("d", "dmin", "m", "s", "e"; empty for the dense dtypes). The field names are
  // static strings.
  std::int64_t first_nonfinite = -1;
  std::string_view first_nonfinite_field;
  // The same for the first subnormal value.
  std::int64_t first_subnormal = -1;
  std::string_view first_subnormal_field;

  // No NaN and no infinity (subnormals are finite).
  [[nodiscard]] bool finite() const { return nan == 0 && inf == 0; }
  // Adds the scan of the bytes that follow this scan's (counts add; a first index
  // is taken from `later` only where this scan has none).
  void append(const ValueScan& later);

  friend bool operator==(const ValueScan&, const ValueScan&) = default;
};

// Whether a scan of `t` examines anything: the dense float dtypes and every
// block format. Integer and bool dtypes hold no floats.
[[nodiscard]] bool has_float_values(DType t);

// Whether a subnormal value of `t` is still subnormal once widened to f32 (and so
// slow on CPUs that do not flush it to zero, and a sign of garbage when there are
// many): true for f32, bf16, f64, q8_k and mxfp4; false for f16 and the formats
// with f16 scales, and for dtypes without floats.
[[nodiscard]] bool subnormal_in_f32(DType t);

// Scans `bytes`, whole blocks of `t`, numbering them from `first_block` (a caller
// that scans a tensor in chunks passes each chunk's position, so indices are the
// tensor's). kInvalidArgument when the size is not a whole number of blocks or
// `first_block` is negative. Reads exactly `bytes`, nothing around it.
[[nodiscard]] Result<ValueScan> scan_values(DType t, std::span<const std::byte> bytes,
                                            std::int64_t first_block = 0);

}  // namespace switchyard
