// The CPU backend's registration rows, exposed for the lint test that checks them
// as written (before register_kernels' safety-net fills could hide a gap).
#pragma once

#include <vector>

#include "switchyard/binding_table.h"

namespace switchyard::cpu {

// Every CPU row, in registration order (SIMD rows only where the CPU runs them).
[[nodiscard]] const std::vector<KernelBindingTable::Row>& registration_rows();

}  // namespace switchyard::cpu
