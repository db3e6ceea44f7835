// The one explicit list of built-in backends. A backend is wired in here and
// nowhere else; no static initialiser registers kernels (static linking would drop
// it silently).
#include "switchyard/backends.h"

#include <array>

#include "backends/backend_list.h"

namespace switchyard {
namespace {

struct BuiltinBackend {
  BackendId id;
  void (*register_kernels)(KernelBindingTable&);
};

constexpr std::array kBuiltinBackends = {
    BuiltinBackend{BackendId::kCpu, &cpu::register_kernels},
};

constexpr std::array<BackendId, kBuiltinBackends.size()> backend_ids() {
  std::array<BackendId, kBuiltinBackends.size()> ids{};
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = kBuiltinBackends[i].id;
  return ids;
}
constexpr auto kCompiledBackendIds = backend_ids();

}  // namespace

std::span<const BackendId> compiled_backends() { return kCompiledBackendIds; }

void register_builtin_backends(KernelBindingTable& table) {
  for (const BuiltinBackend& backend : kBuiltinBackends) backend.register_kernels(table);
}

Result<KernelBindingTable> make_builtin_table() {
  KernelBindingTable table;
  register_builtin_backends(table);
  SWITCHYARD_RETURN_IF_ERROR(table.finalize());
  return table;
}

}  // namespace switchyard
