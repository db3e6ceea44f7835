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
#pragma once

#include <cstdint>
#include <memory>

#include "switchyard/binding_table.h"
#include "switchyard/function_ref.h"

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

}  // namespace switchyard
