// The null backend: the skeleton to copy when adding a backend.
//
// It registers what every backend must and nothing more: its section in the
// binding table (its identity and memory hooks) and an empty list of kernels. A
// table holding it answers every lookup on `null` with a miss that says what
// exists elsewhere, and the registry reports a model planned onto it as running
// everywhere but where it was sent, which is exactly what the dispatch layer is
// for. docs/adding.md walks through turning a copy of this folder into a backend.
#pragma once

#include "switchyard/binding_table.h"

namespace switchyard::null {

// Adds the null backend's section (host memory stands in for a device) and its
// kernels (none) to `table`.
void register_backend(KernelBindingTable& table);

}  // namespace switchyard::null
