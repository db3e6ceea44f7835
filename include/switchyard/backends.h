// The built-in backends: the one explicit list that wires backends in
// (src/backends/backend_list.def), and the table built from it.
//
// The dispatch layer names no backend, so the top of the stack publishes the
// built-in table: the tool, the model loader and the test and benchmark mains
// call install_builtin_table() once at startup.
//
// Example
//   int main() {
//     if (Result<std::uint64_t> g = install_builtin_table(); !g.is_ok()) return 1;
//     TableSnapshot table = current_table();
//     ...
//   }
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "switchyard/backend.h"
#include "switchyard/binding_table.h"

namespace switchyard {

// The backends compiled into this build, in the order they register.
[[nodiscard]] std::span<const BackendId> compiled_backends();

// Whether `backend` is compiled into this build.
[[nodiscard]] bool is_compiled(BackendId backend);

// Parses a backend name (case-insensitive) that must be compiled into this build.
// kInvalidArgument names the compiled backends, both for an unknown name and for
// a known backend this build does not have.
[[nodiscard]] Result<BackendId> parse_compiled_backend(std::string_view text);

// The backend work goes to when the user does not choose: the first compiled
// accelerator whose memory in `table` is ready (a device is present), else the
// host backend.
[[nodiscard]] BackendId default_backend(const KernelBindingTable& table);

// Registers every compiled backend into `table`: its section (memory hooks), its
// kernels and its fill passes. Does not finalize.
void register_builtin_backends(KernelBindingTable& table);

// A fresh, finalized table holding the built-in backends. Fails with the
// finalize() report on a registration bug.
[[nodiscard]] Result<KernelBindingTable> make_builtin_table();

// Publishes the built-in table unless a table was already published
// (publish_initial_table in dispatch.h); returns the generation now current.
// Then installs the kernel packs SWITCHYARD_KERNEL_PACKS names (kernel_packs.h),
// once per process. Idempotent and thread-safe: call it at startup.
[[nodiscard]] Result<std::uint64_t> install_builtin_table();

}  // namespace switchyard
