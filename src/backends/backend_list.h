// Registration entry points of the compiled backends. Each backend defines exactly
// one, in its registration file; backends.cpp calls them from one explicit list.
#pragma once

#include "switchyard/binding_table.h"

namespace switchyard {
namespace cpu {
void register_kernels(KernelBindingTable& table);
}  // namespace cpu
}  // namespace switchyard
