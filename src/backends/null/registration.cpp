// The null backend's registration file: the one place its kernels would enter the
// binding table.
//
// A real backend keeps this shape: its section first (a device backend passes its
// own BackendMemory, which allocates device memory and copies to and from the
// host), then its rows, best first and a portable kernel last at every key, then
// the fill passes that give unaudited rows a cost. Its kernels live in family
// folders beside this file (gemm/, quant/, elementwise/ ... as under cpu/).
#include "backends/null/registration.h"

#include <vector>

namespace switchyard::null {
namespace {

// The rows this backend registers: none yet. A row is
//   {OpKind::kAdd, {DType::kF32, DType::kF32, DType::kF32}, &add_f32, options},
// with options naming the kernel (kernel_name(key, dtypes, BackendId::kNull,
// "ref") gives "add_f32__null_ref"; build every name with it, as the CPU's row()
// does), its caps, its precision claim and its cost.
const std::vector<KernelBindingTable::Row>& registration_rows() {
  static const std::vector<KernelBindingTable::Row> kRows;
  return kRows;
}

}  // namespace

void register_backend(KernelBindingTable& table) {
  // Host memory stands in for the device: a skeleton whose buffers can be read
  // back without a device. A device backend registers its own memory here.
  table.add_backend(BackendId::kNull, host_memory());
  table.register_rows(BackendId::kNull, registration_rows());
}

}  // namespace switchyard::null
