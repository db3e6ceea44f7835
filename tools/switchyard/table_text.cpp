#include "table_text.h"

#include <fmt/format.h>

namespace switchyard::tool {

std::string key_label(const KernelBindingTable& table, BindingKey key) {
  if (auto op = key.static_op()) return std::string(name(*op));
  const RuntimeFusedInfo* info = table.runtime_fused(*key.fused_id());
  return info ? "fused:" + info->name : fmt::format("fused#{}", key.raw());
}

std::string signature(const DTypeList& dtypes) {
  std::string text;
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    if (i) text += i + 1 == dtypes.size() ? " -> " : ",";
    text += name(dtypes[i]);
  }
  return text;
}

}  // namespace switchyard::tool
