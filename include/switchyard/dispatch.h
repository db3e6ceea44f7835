// The process-wide kernel binding table, published as an immutable snapshot.
//
// Readers call `current_table()` and get a shared pointer to a finalized table that
// no one will ever modify; they hold no lock while they use it. Writers are
// serialised: `update_table` clones the current table, lets the caller extend the
// clone, finalizes it and publishes it with the next generation number. A reader
// that planned against generation G can compare it with `current_generation()` to
// notice that the table has moved on.
//
// Nothing is published until the top of the stack publishes a table: the tool,
// the model loader and the test and benchmark mains call install_builtin_table()
// (backends.h), which builds the table from the explicit backend list. No static
// initialiser registers anything, and this layer names no backend.
//
// Kernel masking
//   The published table is the unmasked base table minus the current kernel mask
//   (kernel_mask.h). `update_table` and `publish_table` edit the base; the mask is
//   re-applied before every publication, so an edit can never resurrect a masked
//   binding and clearing the mask restores everything that was registered. The
//   mask starts as SWITCHYARD_MASK_KERNELS, read once at first use; when the first
//   table is published through publish_initial_table() a line on stderr says what
//   it hides. A malformed value is printed loudly to stderr and masks nothing (the
//   first use cannot return a Status).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "switchyard/binding_table.h"
#include "switchyard/function_ref.h"
#include "switchyard/kernel_mask.h"

namespace switchyard {

using TableSnapshot = std::shared_ptr<const KernelBindingTable>;

// The current snapshot. Calling it before any table was published is a
// programmer error: the process aborts with a message naming
// install_builtin_table(), since every dispatch against an empty table would miss.
[[nodiscard]] TableSnapshot current_table();

// The generation of the current snapshot: 0 before the first publication, 1 for
// the first table published.
[[nodiscard]] std::uint64_t current_generation();

// Publishes `build()`'s table if no table was published yet, and returns the
// generation now current; when one was, `build` is not called. Safe to call from
// several threads and several times: exactly one table becomes generation 1.
// Fails (publishing nothing) when `build` or finalize() fails.
[[nodiscard]] Result<std::uint64_t> publish_initial_table(
    FunctionRef<Result<KernelBindingTable>()> build);

// Clones the current table, applies `edit`, finalizes and publishes the result.
// When `edit` or finalize() fails nothing is published and the failure is returned.
// Returns the new generation.
[[nodiscard]] Result<std::uint64_t> update_table(FunctionRef<Status(KernelBindingTable&)> edit);

// Replaces the published table with `table` (finalized here). For tests and for
// tools that build a table from scratch.
[[nodiscard]] Result<std::uint64_t> publish_table(KernelBindingTable table);

// Replaces the kernel mask and publishes base-minus-mask with the next generation.
// Fails (and publishes nothing) only when the masked table does not finalize.
// Before the first publication it only records the mask (and returns 0): the first
// table published is masked by it.
[[nodiscard]] Result<std::uint64_t> set_kernel_mask(KernelMask mask);

// Removes the mask: the published table is the base table again.
[[nodiscard]] Result<std::uint64_t> clear_kernel_mask();

// The mask applied to the current snapshot.
[[nodiscard]] KernelMask current_kernel_mask();

// Every binding the current mask hides, in table order (empty without a mask).
[[nodiscard]] std::vector<CoverageBinding> masked_bindings();

}  // namespace switchyard
