// dot_peak.h: the AMX-BF16 peak (tdpbf16ps, 16 x 16 x 32 bf16 multiply-adds each).
#include "dot_peak.h"
#include "dot_peak_tiles_inl.h"

namespace switchyard::bench {

double dot_peak_amx_bf16(std::int64_t iterations) {
  return tile_peak(iterations, 4.0 * 16 * 16 * 32, [] {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  });
}

}  // namespace switchyard::bench
