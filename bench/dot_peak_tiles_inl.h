// The AMX half of dot_peak.h, shared by dot_peak_amx.cpp and
// dot_peak_amxbf16.cpp: the tiles configured and filled once, then `round`
// (four independent tile products into tmm0-3 from tmm4-7) timed `iterations`
// times. In an anonymous namespace: each file compiles its own copy with its own
// flags. Include only from those files.
#pragma once

#include <immintrin.h>

#include <chrono>
#include <cstdint>

#include "backends/cpu/quant/amx_tile_config.h"

namespace switchyard::bench {
namespace {

template <typename Round>
double tile_peak(std::int64_t iterations, double macs_per_round, Round round) {
  cpu::AmxTileConfig config;
  for (int t = 0; t < 8; ++t) config.set(t, 16, 64);
  // As bf16 pairs these are numbers near 1; as bytes, small integers.
  alignas(64) std::uint16_t values[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) values[i] = static_cast<std::uint16_t>(0x3f80 + i % 5);
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, values, 64);
  _tile_loadd(5, values, 64);
  _tile_loadd(6, values, 64);
  _tile_loadd(7, values, 64);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t it = 0; it < iterations; ++it) round();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  alignas(64) std::uint32_t out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  asm volatile("" : : "r"(out[0]) : "memory");
  return macs_per_round * static_cast<double>(iterations) / seconds;
}

}  // namespace
}  // namespace switchyard::bench
