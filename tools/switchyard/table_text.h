// Text forms of binding-table keys shared by the commands that print the table.
#pragma once

#include <string>

#include "switchyard/binding_table.h"

namespace switchyard::tool {

// "matmul", or "fused:<name>" for a runtime-fused key ("fused#<id>" if unknown).
[[nodiscard]] std::string key_label(const KernelBindingTable& table, BindingKey key);

// Static ops have one output, the last operand: "f32,f32 -> f32".
[[nodiscard]] std::string signature(const DTypeList& dtypes);

}  // namespace switchyard::tool
