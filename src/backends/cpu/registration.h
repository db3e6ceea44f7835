// The CPU backend's entry point in the backend list (backend_list.def), and its
// registration rows, exposed for the lint test that checks them as written (before
// register_backend's safety-net fills could hide a gap).
#pragma once

#include <vector>

#include "switchyard/binding_table.h"

namespace switchyard::cpu {

// Adds the CPU's section (host memory) and every CPU kernel to `table`.
void register_backend(KernelBindingTable& table);

// Every CPU row, in registration order (SIMD rows only where the CPU runs them).
[[nodiscard]] const std::vector<KernelBindingTable::Row>& registration_rows();

}  // namespace switchyard::cpu
