// The built-in backends: the one explicit list that wires backends in.
#pragma once

#include <span>

#include "switchyard/backend.h"
#include "switchyard/binding_table.h"

namespace switchyard {

// The backends compiled into this build, in the order they register.
[[nodiscard]] std::span<const BackendId> compiled_backends();

// Registers the kernels of every compiled backend into `table` and runs each
// backend's fill passes. Does not finalize.
void register_builtin_backends(KernelBindingTable& table);

// A fresh, finalized table holding the built-in backends (what current_table()
// starts from). Fails with the finalize() report on a registration bug.
[[nodiscard]] Result<KernelBindingTable> make_builtin_table();

}  // namespace switchyard
