// The 64-byte tile configuration that ldtilecfg reads (palette 1): per tile
// register, its rows and its bytes per row. Plain data, so that portable code and
// every AMX file (and the peak benchmark) share one definition; loading it takes
// the AMX files' flags.
#pragma once

#include <cstdint>

namespace switchyard::cpu {

struct alignas(64) AmxTileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};

  // Tile t as `rows` rows of `bytes` bytes.
  constexpr void set(int t, int rows_count, int bytes) {
    rows[t] = static_cast<std::uint8_t>(rows_count);
    colsb[t] = static_cast<std::uint16_t>(bytes);
  }
};
static_assert(sizeof(AmxTileConfig) == 64);

}  // namespace switchyard::cpu
