// dot_peak.h: the AMX-INT8 peak (tdpbssd, 16 x 16 x 64 byte multiply-adds each).
#include "dot_peak.h"
#include "dot_peak_tiles_inl.h"

namespace switchyard::bench {

double dot_peak_amx_int8(std::int64_t iterations) {
  return tile_peak(iterations, 4.0 * 16 * 16 * 64, [] {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  });
}

}  // namespace switchyard::bench
