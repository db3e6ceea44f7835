// Loading kernel packs: shared libraries that add kernels to the binding table
// through the C ABI of kernel_pack.h, checked against the manifest beside them.
//
// A pack's kernels enter the table as siblings whose source is "pack:<name>"
// (the manifest's pack name) and whose declaration site names the library and
// the manifest entry. From then on they are ordinary entries: finalize() refuses
// a name or function registered twice (naming both sites), the planner ranks
// them by their cost formulas, the kernel mask hides them, the conformance
// harness verifies their claims, and the verification ledger keys them by their
// revision hash.
//
// All or nothing: a pack that is missing, built for another ABI version, lacks
// a symbol, fails or crashes while registering, declares a malformed kernel or
// disagrees with its manifest is refused with the reason, and the table is left
// as it was.
//
// The library stays loaded while any table holds one of its kernels (each entry
// keeps a reference to it).
//
// Example
//   KernelBindingTable table = ...;  // unfinalized, or finalize again after
//   SWITCHYARD_ASSIGN_OR_RETURN(KernelPackInfo pack,
//                               load_kernel_pack(table, "build/libfast_add.so"));
//   SWITCHYARD_RETURN_IF_ERROR(table.finalize());
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/binding_table.h"
#include "switchyard/status.h"

namespace switchyard {

struct KernelPackInfo {
  // The manifest's pack name; the entries' source is "pack:" + name.
  std::string name;
  std::string library_path;
  std::string manifest_path;
  // The kernels it registered, in registration order.
  std::vector<std::string> kernels;
};

// The manifest of the pack at `library_path`: the same path with its extension
// replaced by ".json".
[[nodiscard]] std::string kernel_pack_manifest_path(std::string_view library_path);

// Loads the pack at `library_path` and registers its kernels into `table` (which
// is left unfinalized). On failure `table` is unchanged.
[[nodiscard]] Result<KernelPackInfo> load_kernel_pack(KernelBindingTable& table,
                                                      std::string_view library_path);

// Loads every pack into the process-wide table (dispatch.h, update_table) and
// publishes the result once; nothing is published when any pack is refused or
// the table does not finalize (a kernel name a built-in already uses). Returns
// what each pack registered.
[[nodiscard]] Result<std::vector<KernelPackInfo>> install_kernel_packs(
    std::span<const std::string> library_paths);

// The packs SWITCHYARD_KERNEL_PACKS names: paths separated by ':' (empty items
// are skipped). Empty when the variable is unset.
[[nodiscard]] std::vector<std::string> kernel_packs_from_environment();

// Installs the packs of kernel_packs_from_environment() once per process; later
// calls return the first call's outcome. install_builtin_table() (backends.h)
// calls it, so every program that publishes the built-in table gets them.
[[nodiscard]] Status install_environment_kernel_packs();

// Every pack install_kernel_packs has loaded into the process, in load order.
[[nodiscard]] std::vector<KernelPackInfo> installed_kernel_packs();

}  // namespace switchyard
