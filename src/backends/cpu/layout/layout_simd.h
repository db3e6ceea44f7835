// The SIMD pieces of the layout siblings (layout.cpp): register transposes of
// tiles and short copies, compiled per instruction set (layout_avx2.cpp). The
// checks, the split between threads and the strided fallbacks stay in layout.cpp,
// which is compiled for the baseline ISA.
//
// Everything here moves bits: elements are 4 or 2 bytes, never interpreted, so
// NaN payloads, signed zeros and subnormals come out as they went in.
#pragma once

#include <cstddef>
#include <cstdint>

namespace switchyard::cpu {

// Transposes a block of `rows` x `cols` elements: element (i, j) at
// src[i * src_pitch + j] goes to dst[j * dst_pitch + i]. Pitches are in elements.
using TransposeBlockFn = void (*)(const void* src, std::int64_t src_pitch, void* dst,
                                  std::int64_t dst_pitch, std::int64_t rows, std::int64_t cols);

struct LayoutSimd {
  // Rows per transpose task: the rows a task reads at once, so that each output
  // row receives whole cache lines from one task (see Note [Transpose panels]).
  std::int64_t transpose_panel4;
  std::int64_t transpose_panel2;
  TransposeBlockFn transpose4;  // 4-byte elements
  TransposeBlockFn transpose2;  // 2-byte elements
  // The same with non-temporal stores of whole output lines, for outputs larger
  // than the caches (layout_avx2.cpp, Note [Streamed transposes]): `dst` and the
  // destination pitch in bytes are multiples of 64 and `rows` is a multiple of
  // 64 bytes' worth of elements (16 or 32). A task's block is `stream_run_bytes`
  // of each input row wide.
  std::int64_t stream_run_bytes;
  TransposeBlockFn transpose4_stream;
  TransposeBlockFn transpose2_stream;
  // Copies `bytes` bytes between buffers that do not overlap.
  void (*copy)(void* dst, const void* src, std::size_t bytes);
};

// Call only when cpu_features() reports AVX2.
[[nodiscard]] const LayoutSimd& layout_avx2();

}  // namespace switchyard::cpu
