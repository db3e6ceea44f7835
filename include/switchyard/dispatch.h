// The process-wide kernel binding table, published as an immutable snapshot.
//
// Readers call `current_table()` and get a shared pointer to a finalized table that
// no one will ever modify; they hold no lock while they use it. Writers are
// serialised: `update_table` clones the current table, lets the caller extend the
// clone, finalizes it and publishes it with the next generation number. A reader
// that planned against generation G can compare it with `current_generation()` to
// notice that the table has moved on.
//
// The built-in backends are registered once, on first use, from the explicit
// backend list in backends.h; no static initialiser registers anything.
//
// Kernel masking
//   The published table is the unmasked base table minus the current kernel mask
//   (kernel_mask.h). `update_table` and `publish_table` edit the base; the mask is
//   re-applied before every publication, so an edit can never resurrect a masked
//   binding and clearing the mask restores everything that was registered. The
//   mask starts as SWITCHYARD_MASK_KERNELS, read once at first use, and a line on
//   stderr says what it hides; a malformed value is printed loudly to stderr and
//   masks nothing (the first use cannot return a Status).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "switchyard/binding_table.h"
#include "switchyard/function_ref.h"
#include "switchyard/kernel_mask.h"

namespace switchyard {

using TableSnapshot = std::shared_ptr<const KernelBindingTable>;

// The current snapshot. The first call builds the built-in table; if that fails
// (a registration bug), the process aborts with the finalize() report, because no
// dispatch can be trusted after it.
[[nodiscard]] TableSnapshot current_table();

// The generation of the current snapshot (1 for the built-in table).
[[nodiscard]] std::uint64_t current_generation();

// Clones the current table, applies `edit`, finalizes and publishes the result.
// When `edit` or finalize() fails nothing is published and the failure is returned.
// Returns the new generation.
[[nodiscard]] Result<std::uint64_t> update_table(FunctionRef<Status(KernelBindingTable&)> edit);

// Replaces the published table with `table` (finalized here). For tests and for
// tools that build a table from scratch.
[[nodiscard]] Result<std::uint64_t> publish_table(KernelBindingTable table);

// Replaces the kernel mask and publishes base-minus-mask with the next generation.
// Fails (and publishes nothing) only when the masked table does not finalize.
[[nodiscard]] Result<std::uint64_t> set_kernel_mask(KernelMask mask);

// Removes the mask: the published table is the base table again.
[[nodiscard]] Result<std::uint64_t> clear_kernel_mask();

// The mask applied to the current snapshot.
[[nodiscard]] KernelMask current_kernel_mask();

// Every binding the current mask hides, in table order (empty without a mask).
[[nodiscard]] std::vector<CoverageBinding> masked_bindings();

}  // namespace switchyard
